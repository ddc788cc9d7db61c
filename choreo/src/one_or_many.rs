//! Small lists that keep their first elements inline: [`OneOrMany`] (one element) and
//! [`InlineList`] (`N` elements).
//!
//! Kernel calls almost always run on one stream, so the per-call lists of the runtime (the work
//! streams, the events recorded after the call, the events of its `Pending`) usually hold one
//! element; keeping it inline saves a heap allocation per list and call (measured: the wrapper
//! layer's host time is part of every launch, see `docs/performance.md`). The device buffers a
//! call hands out (for the aliasing check) are a few more: [`InlineList`] keeps four inline.

/// A list of `T` that stores zero or one element without allocating.
#[derive(Clone, Debug, Default)]
pub(crate) enum OneOrMany<T> {
    /// No element.
    #[default]
    Empty,
    /// One element, inline.
    One(T),
    /// Two or more elements.
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// Appends `value`.
    pub(crate) fn push(&mut self, value: T) {
        *self = match std::mem::take(self) {
            OneOrMany::Empty => OneOrMany::One(value),
            OneOrMany::One(first) => OneOrMany::Many(vec![first, value]),
            OneOrMany::Many(mut values) => {
                values.push(value);
                OneOrMany::Many(values)
            }
        };
    }

    /// The elements, mutably.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            OneOrMany::Empty => &mut [],
            OneOrMany::One(value) => std::slice::from_mut(value),
            OneOrMany::Many(values) => values,
        }
    }

    /// The elements, in the order pushed.
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            OneOrMany::Empty => &[],
            OneOrMany::One(value) => std::slice::from_ref(value),
            OneOrMany::Many(values) => values,
        }
    }
}

impl<T> FromIterator<T> for OneOrMany<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut list = OneOrMany::Empty;
        list.extend(iter);
        list
    }
}

impl<T> Extend<T> for OneOrMany<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for value in iter {
            self.push(value);
        }
    }
}

impl<T> IntoIterator for OneOrMany<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        match self {
            OneOrMany::Empty => Vec::new().into_iter(),
            OneOrMany::One(value) => vec![value].into_iter(),
            OneOrMany::Many(values) => values.into_iter(),
        }
    }
}

/// A list of `Copy` values that stores its first `N` elements inline, without allocating.
#[derive(Clone, Debug)]
pub(crate) struct InlineList<T: Copy + Default, const N: usize> {
    /// Number of elements (inline and spilled).
    len: usize,
    /// The first `min(len, N)` elements.
    inline: [T; N],
    /// The elements after the first `N`.
    spilled: Vec<T>,
}

impl<T: Copy + Default, const N: usize> Default for InlineList<T, N> {
    fn default() -> Self {
        InlineList { len: 0, inline: [T::default(); N], spilled: Vec::new() }
    }
}

impl<T: Copy + Default, const N: usize> InlineList<T, N> {
    /// Appends `value` (allocates only once more than `N` elements are held).
    pub(crate) fn push(&mut self, value: T) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = value,
            None => self.spilled.push(value),
        }
        self.len += 1;
    }

    /// The number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The elements, in the order pushed.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.inline[..self.len.min(N)].iter().chain(&self.spilled)
    }
}

#[cfg(test)]
mod tests {
    use super::{InlineList, OneOrMany};

    #[test]
    fn inline_list_spills_past_its_inline_capacity_in_order() {
        let mut list: InlineList<u32, 2> = InlineList::default();
        assert_eq!(list.iter().count(), 0);
        list.push(1);
        list.push(2);
        assert!(list.spilled.capacity() == 0, "two elements fit inline");
        list.push(3);
        list.push(4);
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
    }

    #[test]
    fn keeps_order_from_zero_to_many() {
        let mut list = OneOrMany::default();
        assert!(list.as_slice().is_empty());
        list.push(1);
        assert!(matches!(list, OneOrMany::One(1)));
        list.push(2);
        list.extend([3, 4]);
        assert_eq!(list.as_slice(), [1, 2, 3, 4]);
        let collected: OneOrMany<i32> = list.into_iter().rev().collect();
        assert_eq!(collected.as_slice(), [4, 3, 2, 1]);
    }
}
