//! The `ndarray` feature: host tensors and views to and from ndarray arrays, without copies
//! where the layout allows, and device tensors from any layout (on the CPU device here).
#![cfg(feature = "ndarray")]

use choreo::{Device, DeviceTensor, Error, HostTensor, HostView, HostViewMut, Stream};
use ndarray::{Array, Array2, Array3, ArrayView2, Ix2, array, s};

#[test]
fn a_standard_layout_view_is_borrowed_without_a_copy() -> choreo::Result<()> {
    let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let view = HostView::from_ndarray(a.view())?;
    assert_eq!(view.shape(), [2, 3]);
    assert_eq!(view.as_slice().as_ptr(), a.as_ptr(), "the view borrows the array's storage");
    assert_eq!(view.get([1, 2]), Some(&6.0));
    // And back: an ndarray view of the same memory.
    let back: ArrayView2<'_, f32> = view.as_ndarray();
    assert_eq!(back, a.view());
    assert_eq!(back.as_ptr(), a.as_ptr());
    Ok(())
}

#[test]
fn other_layouts_are_refused_for_views() {
    let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let transposed = HostView::from_ndarray(a.t());
    assert!(
        matches!(&transposed, Err(Error::InvalidArgument(m)) if m.contains("as_standard_layout")),
        "{transposed:?}"
    );
    let strided = HostView::from_ndarray(a.slice(s![.., ..;2]));
    assert!(matches!(strided, Err(Error::InvalidArgument(_))), "{strided:?}");
    let mut b = a.clone();
    let mutable = HostViewMut::from_ndarray(b.view_mut().reversed_axes());
    assert!(matches!(mutable, Err(Error::InvalidArgument(_))));
}

#[test]
fn a_mutable_view_writes_the_array() -> choreo::Result<()> {
    let mut a = Array2::<i32>::zeros((2, 2));
    {
        let mut view = HostViewMut::from_ndarray(a.view_mut())?;
        view.as_mut_slice().copy_from_slice(&[1, 2, 3, 4]);
        view.as_ndarray_mut()[[0, 0]] = 10;
    }
    assert_eq!(a, array![[10, 2], [3, 4]]);
    Ok(())
}

#[test]
fn owned_arrays_move_into_tensors_and_back_without_copies() {
    let a = Array::from_shape_vec((2, 2, 3), (0..12).collect::<Vec<u16>>()).unwrap_or_default();
    let pointer = a.as_ptr();
    let tensor: HostTensor<u16, 3> = HostTensor::from_ndarray(a);
    assert_eq!(tensor.shape(), [2, 2, 3]);
    assert_eq!(tensor.as_slice().as_ptr(), pointer, "the Vec was moved, not copied");
    assert_eq!(tensor[[1, 0, 2]], 8);
    assert_eq!(tensor.as_ndarray()[[1, 1, 0]], 9);
    let back: Array3<u16> = tensor.into_ndarray();
    assert_eq!(back.as_ptr(), pointer);
    assert_eq!(back[[1, 0, 2]], 8);
}

#[test]
fn owned_arrays_in_other_layouts_are_copied_in_row_major_order() {
    // Transposed (column-major) storage.
    let a = array![[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]].reversed_axes();
    let tensor = HostTensor::from_ndarray(a);
    assert_eq!(tensor.shape(), [3, 2]);
    assert_eq!(tensor.as_slice(), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    // A standard-layout part of a larger array (its storage starts at an offset).
    let rows = array![[1u8, 2], [3, 4], [5, 6]].slice_move(s![1.., ..]);
    assert!(rows.is_standard_layout());
    let tensor = HostTensor::from_ndarray(rows);
    assert_eq!((tensor.shape(), tensor.as_slice()), ([2, 2], &[3u8, 4, 5, 6][..]));
    let mut t = HostTensor::from_ndarray(array![[1i8, 2], [3, 4]]);
    t.as_ndarray_mut()[[1, 1]] = -4;
    assert_eq!(t.as_slice(), [1, 2, 3, -4]);
}

#[test]
fn device_tensors_take_any_layout_and_come_back_as_arrays() -> choreo::Result<()> {
    let stream = Stream::new_on_device(Device::cpu())?;
    let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let x = DeviceTensor::from_ndarray(&stream, a.view())?;
    assert_eq!(x.shape(), [2, 3]);
    assert_eq!(x.to_ndarray(&stream)?, a);
    // A transposed view goes through a row-major copy.
    let t = DeviceTensor::from_ndarray(&stream, a.t())?;
    assert_eq!(t.shape(), [3, 2]);
    assert_eq!(t.to_host(&stream)?.as_slice(), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let mut y = DeviceTensor::<f32, 2>::zeros_on(&stream, [3, 2])?;
    y.copy_from_ndarray(&stream, a.t())?;
    assert_eq!(y.to_ndarray(&stream)?, a.t());
    let wrong = y.copy_from_ndarray(&stream, a.view());
    assert!(matches!(wrong, Err(Error::Shape { dim: 0, expected: 3, got: 2, .. })), "{wrong:?}");
    let _: ndarray::Array<f32, Ix2> = y.to_ndarray(&stream)?;
    Ok(())
}
