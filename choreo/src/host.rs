//! Host-side data: owned tensors and borrowed views with a row-major shape.

use std::ops::{Index, IndexMut};

use crate::{Error, Result};

/// The number of elements of `shape`, or an error when the product overflows `usize`.
pub fn element_count(shape: &[usize]) -> Result<usize> {
    shape.iter().try_fold(1usize, |count, &extent| count.checked_mul(extent)).ok_or_else(|| {
        Error::InvalidArgument(format!("shape {shape:?} has more elements than fit in usize"))
    })
}

/// Checks that `len` elements fill `shape` exactly.
fn check_len(shape: &[usize], len: usize) -> Result<()> {
    let expected = element_count(shape)?;
    if expected == len { Ok(()) } else { Err(Error::Length { expected, got: len }) }
}

/// Row-major offset of `index` in `shape`, `None` when out of bounds.
fn offset<const R: usize>(shape: &[usize; R], index: &[usize; R]) -> Option<usize> {
    let mut offset = 0usize;
    for (&i, &extent) in index.iter().zip(shape) {
        if i >= extent {
            return None;
        }
        // Cannot overflow: the result is smaller than the element count, which fits in usize.
        offset = offset * extent + i;
    }
    Some(offset)
}

/// An owned, row-major host tensor of rank `R`: a `Vec<T>` and its shape.
///
/// This is what kernel wrappers return for `.co` functions that return data, and what
/// [`crate::DeviceTensor::to_host`] produces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostTensor<T, const R: usize> {
    data: Vec<T>,
    shape: [usize; R],
}

impl<T, const R: usize> HostTensor<T, R> {
    /// Wraps `data` with `shape`; [`Error::Length`] when the element count differs.
    pub fn new(data: Vec<T>, shape: [usize; R]) -> Result<Self> {
        check_len(&shape, data.len())?;
        Ok(Self { data, shape })
    }

    /// A tensor of `shape` with every element equal to `value`.
    pub fn filled(shape: [usize; R], value: T) -> Result<Self>
    where
        T: Clone,
    {
        let len = element_count(&shape)?;
        let mut data = Vec::new();
        let bytes = len.saturating_mul(size_of::<T>());
        data.try_reserve_exact(len).map_err(|_| Error::OutOfHostMemory { bytes })?;
        data.resize(len, value);
        Ok(Self { data, shape })
    }

    /// A tensor of `shape` filled with `T::default()` (zero for numbers).
    pub fn zeros(shape: [usize; R]) -> Result<Self>
    where
        T: Clone + Default,
    {
        Self::filled(shape, T::default())
    }

    /// The extents, outermost first.
    pub fn shape(&self) -> [usize; R] {
        self.shape
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// `true` when some extent is zero.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements in row-major order.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The elements in row-major order, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// The element at `index`, `None` when out of bounds.
    pub fn get(&self, index: [usize; R]) -> Option<&T> {
        offset(&self.shape, &index).map(|at| &self.data[at])
    }

    /// The element at `index`, mutably; `None` when out of bounds.
    pub fn get_mut(&mut self, index: [usize; R]) -> Option<&mut T> {
        offset(&self.shape, &index).map(move |at| &mut self.data[at])
    }

    /// The elements, giving up the shape.
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }

    /// The same elements with another shape of the same element count.
    pub fn reshape<const R2: usize>(self, shape: [usize; R2]) -> Result<HostTensor<T, R2>> {
        HostTensor::new(self.data, shape)
    }

    /// A borrowed view of the whole tensor.
    pub fn view(&self) -> HostView<'_, T, R> {
        HostView { data: &self.data, shape: self.shape }
    }

    /// A mutable borrowed view of the whole tensor.
    pub fn view_mut(&mut self) -> HostViewMut<'_, T, R> {
        HostViewMut { data: &mut self.data, shape: self.shape }
    }
}

impl<T> HostTensor<T, 1> {
    /// A rank-1 tensor holding `data`.
    pub fn from_vec(data: Vec<T>) -> Self {
        let shape = [data.len()];
        Self { data, shape }
    }
}

/// Indexing by a full multi-index; panics when out of bounds, like slice indexing (use
/// [`HostTensor::get`] for a checked access).
impl<T, const R: usize> Index<[usize; R]> for HostTensor<T, R> {
    type Output = T;

    fn index(&self, index: [usize; R]) -> &T {
        match offset(&self.shape, &index) {
            Some(at) => &self.data[at],
            None => panic!("index {index:?} is out of bounds for shape {:?}", self.shape),
        }
    }
}

impl<T, const R: usize> IndexMut<[usize; R]> for HostTensor<T, R> {
    fn index_mut(&mut self, index: [usize; R]) -> &mut T {
        match offset(&self.shape, &index) {
            Some(at) => &mut self.data[at],
            None => panic!("index {index:?} is out of bounds for shape {:?}", self.shape),
        }
    }
}

/// A borrowed, read-only, row-major view of host data with rank `R`: what kernel wrappers take
/// for `.co` host parameters that are only copied in.
///
/// A rank-1 view converts from `&[T]`, `&Vec<T>` and `&[T; N]` (`slice.into()`); other ranks
/// come from [`HostView::new`] or a [`HostTensor`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct HostView<'a, T, const R: usize> {
    data: &'a [T],
    shape: [usize; R],
}

impl<T, const R: usize> Clone for HostView<'_, T, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, const R: usize> Copy for HostView<'_, T, R> {}

impl<'a, T, const R: usize> HostView<'a, T, R> {
    /// Views `data` with `shape`; [`Error::Length`] when the element count differs.
    pub fn new(data: &'a [T], shape: [usize; R]) -> Result<Self> {
        check_len(&shape, data.len())?;
        Ok(Self { data, shape })
    }

    /// The extents, outermost first.
    pub fn shape(&self) -> [usize; R] {
        self.shape
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// `true` when some extent is zero.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements in row-major order.
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }

    /// The element at `index`, `None` when out of bounds.
    pub fn get(&self, index: [usize; R]) -> Option<&'a T> {
        offset(&self.shape, &index).map(|at| &self.data[at])
    }

    /// An owned copy.
    pub fn to_tensor(&self) -> HostTensor<T, R>
    where
        T: Clone,
    {
        HostTensor { data: self.data.to_vec(), shape: self.shape }
    }
}

impl<'a, T> From<&'a [T]> for HostView<'a, T, 1> {
    fn from(data: &'a [T]) -> Self {
        Self { data, shape: [data.len()] }
    }
}

impl<'a, T> From<&'a Vec<T>> for HostView<'a, T, 1> {
    fn from(data: &'a Vec<T>) -> Self {
        Self::from(data.as_slice())
    }
}

impl<'a, T, const N: usize> From<&'a [T; N]> for HostView<'a, T, 1> {
    fn from(data: &'a [T; N]) -> Self {
        Self::from(data.as_slice())
    }
}

impl<'a, T, const R: usize> From<&'a HostTensor<T, R>> for HostView<'a, T, R> {
    fn from(tensor: &'a HostTensor<T, R>) -> Self {
        tensor.view()
    }
}

impl<'a, T, const R: usize> From<HostViewMut<'a, T, R>> for HostView<'a, T, R> {
    fn from(view: HostViewMut<'a, T, R>) -> Self {
        Self { data: view.data, shape: view.shape }
    }
}

/// A borrowed, writable, row-major view of host data with rank `R`: what kernel wrappers take
/// for `.co` `&` parameters, which are copied in and copied back.
///
/// A rank-1 view converts from `&mut [T]` and `&mut Vec<T>`; other ranks come from
/// [`HostViewMut::new`] or a [`HostTensor`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct HostViewMut<'a, T, const R: usize> {
    data: &'a mut [T],
    shape: [usize; R],
}

impl<'a, T, const R: usize> HostViewMut<'a, T, R> {
    /// Views `data` with `shape`; [`Error::Length`] when the element count differs.
    pub fn new(data: &'a mut [T], shape: [usize; R]) -> Result<Self> {
        check_len(&shape, data.len())?;
        Ok(Self { data, shape })
    }

    /// The extents, outermost first.
    pub fn shape(&self) -> [usize; R] {
        self.shape
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// `true` when some extent is zero.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements in row-major order.
    pub fn as_slice(&self) -> &[T] {
        self.data
    }

    /// The elements in row-major order, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.data
    }

    /// The underlying slice, for the whole lifetime of the view.
    pub fn into_slice(self) -> &'a mut [T] {
        self.data
    }

    /// A shorter-lived view of the same data.
    pub fn reborrow(&mut self) -> HostViewMut<'_, T, R> {
        HostViewMut { data: self.data, shape: self.shape }
    }

    /// A read-only view of the same data.
    pub fn as_view(&self) -> HostView<'_, T, R> {
        HostView { data: self.data, shape: self.shape }
    }

    /// The element at `index`, `None` when out of bounds.
    pub fn get(&self, index: [usize; R]) -> Option<&T> {
        offset(&self.shape, &index).map(|at| &self.data[at])
    }

    /// The element at `index`, mutably; `None` when out of bounds.
    pub fn get_mut(&mut self, index: [usize; R]) -> Option<&mut T> {
        offset(&self.shape, &index).map(move |at| &mut self.data[at])
    }
}

impl<'a, T> From<&'a mut [T]> for HostViewMut<'a, T, 1> {
    fn from(data: &'a mut [T]) -> Self {
        let shape = [data.len()];
        Self { data, shape }
    }
}

impl<'a, T> From<&'a mut Vec<T>> for HostViewMut<'a, T, 1> {
    fn from(data: &'a mut Vec<T>) -> Self {
        Self::from(data.as_mut_slice())
    }
}

impl<'a, T, const N: usize> From<&'a mut [T; N]> for HostViewMut<'a, T, 1> {
    fn from(data: &'a mut [T; N]) -> Self {
        Self::from(data.as_mut_slice())
    }
}

impl<'a, T, const R: usize> From<&'a mut HostTensor<T, R>> for HostViewMut<'a, T, R> {
    fn from(tensor: &'a mut HostTensor<T, R>) -> Self {
        tensor.view_mut()
    }
}
