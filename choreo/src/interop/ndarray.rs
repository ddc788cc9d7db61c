//! Host tensors to and from [`ndarray`](::ndarray) arrays (feature `ndarray`).
//!
//! Choreo's host tensors are row-major ("C order") with a shape `[usize; R]`; an ndarray of
//! dimension `Dim<[usize; R]>` (`Ix1` … `Ix6`) with a standard (row-major, contiguous) layout
//! has the same memory layout, so the conversions borrow or move its storage without copying:
//!
//! | from | to | copies |
//! | --- | --- | --- |
//! | `ArrayView<T, D>` | [`HostView`] ([`HostView::from_ndarray`]) | never; `Err` when the layout is not standard |
//! | `ArrayViewMut<T, D>` | [`HostViewMut`] ([`HostViewMut::from_ndarray`]) | never; `Err` when the layout is not standard |
//! | `Array<T, D>` | [`HostTensor`] ([`HostTensor::from_ndarray`]) | only when the layout is not standard (then into row-major order) |
//! | [`HostTensor`] | `Array<T, D>` ([`HostTensor::into_ndarray`]) | never |
//! | [`HostTensor`], [`HostView`] | `ArrayView<T, D>` (`as_ndarray`) | never |
//! | `ArrayView<T, D>` | [`DeviceTensor`] ([`DeviceTensor::from_ndarray`]) | a row-major host copy only when the layout is not standard, then the usual staged upload |
//! | [`DeviceTensor`] | `Array<T, D>` ([`DeviceTensor::to_ndarray`]) | the usual download |
//!
//! ```
//! # fn main() -> choreo::Result<()> {
//! use ndarray::array;
//! let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! let view = choreo::HostView::from_ndarray(a.view())?; // borrows a's storage
//! assert_eq!(view.shape(), [2, 3]);
//! let tensor = choreo::HostTensor::from_ndarray(a);      // moves it
//! assert_eq!(tensor.into_ndarray()[[1, 2]], 6.0);
//! # Ok(())
//! # }
//! ```

use ::ndarray::{Array, ArrayView, ArrayViewMut, Dim, Dimension};

use crate::elem::DeviceRepr;
use crate::host::{HostTensor, HostView, HostViewMut};
use crate::stream::Stream;
use crate::tensor::DeviceTensor;
use crate::{Error, Result};

/// The ndarray dimension of a rank-`R` choreo shape.
type Ix<const R: usize> = Dim<[usize; R]>;

/// `shape` as an ndarray dimension.
fn dim<const R: usize>(shape: [usize; R]) -> Ix<R>
where
    Ix<R>: Dimension,
{
    let mut dim = Ix::<R>::zeros(R);
    dim.slice_mut().copy_from_slice(&shape);
    dim
}

/// The extents of an ndarray shape of rank `R` (ndarray guarantees `R` extents for `Ix<R>`).
fn shape_of<const R: usize>(extents: &[usize]) -> [usize; R] {
    let mut shape = [0; R];
    shape.copy_from_slice(extents);
    shape
}

/// [`Error::InvalidArgument`] for an array whose layout is not row-major and contiguous.
fn not_standard(what: &str, strides: &[isize]) -> Error {
    Error::InvalidArgument(format!(
        "{what} is not in row-major contiguous (standard) layout (strides {strides:?}); use \
         `.as_standard_layout()` for a row-major copy"
    ))
}

impl<'a, T, const R: usize> HostView<'a, T, R>
where
    Ix<R>: Dimension,
{
    /// Borrows the elements of `array`, which must be in standard layout (row-major and
    /// contiguous, as `Array::from_shape_vec` and `array!` make them), without copying;
    /// [`Error::InvalidArgument`] otherwise (e.g. for a transposed or strided view; use
    /// `array.as_standard_layout()` for a row-major copy).
    pub fn from_ndarray(array: ArrayView<'a, T, Ix<R>>) -> Result<Self> {
        let shape = shape_of(array.shape());
        let strides = array.strides().to_vec();
        match array.to_slice() {
            Some(data) => HostView::new(data, shape),
            None => Err(not_standard("the array view", &strides)),
        }
    }

    /// The view as an ndarray view of the same elements (no copy).
    pub fn as_ndarray(&self) -> ArrayView<'a, T, Ix<R>> {
        let data: &'a [T] = self.as_slice();
        // The element count of `data` equals the product of the shape (checked when the view
        // was made), so the shape fits.
        ArrayView::from_shape(dim(self.shape()), data)
            .unwrap_or_else(|_| unreachable!("a HostView's length matches its shape"))
    }
}

impl<'a, T, const R: usize> HostViewMut<'a, T, R>
where
    Ix<R>: Dimension,
{
    /// Borrows the elements of `array` mutably, without copying; like
    /// [`HostView::from_ndarray`], [`Error::InvalidArgument`] unless the layout is standard.
    pub fn from_ndarray(array: ArrayViewMut<'a, T, Ix<R>>) -> Result<Self> {
        let shape = shape_of(array.shape());
        let strides = array.strides().to_vec();
        match array.into_slice() {
            Some(data) => HostViewMut::new(data, shape),
            None => Err(not_standard("the array view", &strides)),
        }
    }

    /// The view as a mutable ndarray view of the same elements (no copy).
    pub fn as_ndarray_mut(&mut self) -> ArrayViewMut<'_, T, Ix<R>> {
        let shape = self.shape();
        ArrayViewMut::from_shape(dim(shape), self.as_mut_slice())
            .unwrap_or_else(|_| unreachable!("a HostViewMut's length matches its shape"))
    }
}

impl<T, const R: usize> HostTensor<T, R>
where
    Ix<R>: Dimension,
{
    /// Takes the elements of `array`: without copying when it is in standard layout and owns
    /// exactly its elements (as `Array::from_shape_vec`, `Array::zeros` and `array!` make
    /// them), else by copying them in row-major order.
    pub fn from_ndarray(array: Array<T, Ix<R>>) -> Self
    where
        T: Clone,
    {
        let shape = shape_of(array.shape());
        let len = array.len();
        let standard = array.is_standard_layout();
        if standard {
            let (data, offset) = array.into_raw_vec_and_offset();
            if data.len() == len && offset.unwrap_or(0) == 0 {
                return HostTensor::new(data, shape)
                    .unwrap_or_else(|_| unreachable!("an array's length matches its shape"));
            }
            // A standard-layout slice of a larger array: copy its part.
            let start = offset.unwrap_or(0);
            let data = data[start..start + len].to_vec();
            return HostTensor::new(data, shape)
                .unwrap_or_else(|_| unreachable!("an array's length matches its shape"));
        }
        // `iter` visits the elements in logical (row-major) order.
        let data: Vec<T> = array.iter().cloned().collect();
        HostTensor::new(data, shape).unwrap_or_else(|_| unreachable!("same element count"))
    }

    /// The tensor as an ndarray [`Array`] in standard layout, without copying.
    pub fn into_ndarray(self) -> Array<T, Ix<R>> {
        let shape = self.shape();
        Array::from_shape_vec(dim(shape), self.into_vec())
            .unwrap_or_else(|_| unreachable!("a HostTensor's length matches its shape"))
    }

    /// A borrowed ndarray view of the tensor (no copy).
    pub fn as_ndarray(&self) -> ArrayView<'_, T, Ix<R>> {
        self.view().as_ndarray()
    }

    /// A mutable borrowed ndarray view of the tensor (no copy).
    pub fn as_ndarray_mut(&mut self) -> ArrayViewMut<'_, T, Ix<R>> {
        let shape = self.shape();
        ArrayViewMut::from_shape(dim(shape), self.as_mut_slice())
            .unwrap_or_else(|_| unreachable!("a HostTensor's length matches its shape"))
    }
}

impl<T: DeviceRepr, const R: usize> DeviceTensor<T, R>
where
    Ix<R>: Dimension,
{
    /// A tensor on `stream`'s device holding a copy of `array` (any layout: a view in standard
    /// layout is staged directly, another one through a row-major host copy first), staged
    /// like [`DeviceTensor::from_host`].
    pub fn from_ndarray(stream: &Stream, array: ArrayView<'_, T, Ix<R>>) -> Result<Self> {
        let standard = array.as_standard_layout();
        let view = HostView::from_ndarray(standard.view())?;
        DeviceTensor::from_host(stream, view)
    }

    /// A host copy as an ndarray [`Array`], made on `stream` after the work that writes the
    /// tensor; blocks until the copy has completed (see [`DeviceTensor::to_host`]).
    pub fn to_ndarray(&self, stream: &Stream) -> Result<Array<T, Ix<R>>> {
        Ok(self.to_host(stream)?.into_ndarray())
    }

    /// Copies `array` (same shape, any layout) into the tensor on `stream`, like
    /// [`DeviceTensor::copy_from_host`].
    pub fn copy_from_ndarray(
        &mut self,
        stream: &Stream,
        array: ArrayView<'_, T, Ix<R>>,
    ) -> Result<()> {
        let standard = array.as_standard_layout();
        self.copy_from_host(stream, HostView::from_ndarray(standard.view())?)
    }
}
