//! The `limit` least items of a stream by their order, without holding the
//! others: the table's and `--html`'s first rows by id ([`Keyed`]), the
//! timeline's longest connections. A max-heap of at most `limit` items; an
//! item is kept if there is room or it is less than the greatest kept.
//!
//! Does not know what the items are.

use std::collections::BinaryHeap;

/// See the module's comment.
#[derive(Debug)]
pub struct Least<T> {
    limit: usize,
    heap: BinaryHeap<T>,
    /// Items offered in all.
    pub total: u64,
}

impl<T: Ord> Least<T> {
    pub fn new(limit: usize) -> Least<T> {
        Least {
            limit,
            heap: BinaryHeap::new(),
            total: 0,
        }
    }

    /// Whether an item would be kept now, given whether it is less than
    /// the greatest kept (asked only when there is no room): so a caller
    /// can decide before it builds the item.
    pub fn wants(&self, less_than: impl FnOnce(&T) -> bool) -> bool {
        self.heap.len() < self.limit || self.heap.peek().is_some_and(less_than)
    }

    /// Counts `item`, and keeps it if it is among the least so far.
    pub fn offer(&mut self, item: T) {
        let kept = self.wants(|greatest| item < *greatest);
        self.offer_with(|_| kept, || item);
    }

    /// Counts an item, and keeps it — built by `make` only then — if it is
    /// among the least so far, `less_than` saying whether it is less than
    /// the greatest kept: a caller whose items are costly to build (a
    /// record's copy) builds only those kept.
    pub fn offer_with(&mut self, less_than: impl FnOnce(&T) -> bool, make: impl FnOnce() -> T) {
        self.total += 1;
        if self.wants(less_than) {
            if self.heap.len() >= self.limit {
                self.heap.pop();
            }
            self.heap.push(make());
        }
    }

    /// The kept items, least first.
    pub fn into_sorted(self) -> Vec<T> {
        self.heap.into_sorted_vec()
    }
}

/// An item ordered by a number alone (a connection's id): what the
/// table's and `--html`'s first rows keep.
#[derive(Debug)]
pub struct Keyed<T> {
    pub key: u64,
    pub item: T,
}

impl<T> PartialEq for Keyed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<T> Eq for Keyed<T> {}
impl<T> PartialOrd for Keyed<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Keyed<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_least_in_any_order_of_arrival() {
        let items = [7u32, 3, 9, 1, 4, 4, 8, 0, 6];
        for limit in 0..=items.len() + 1 {
            let mut least = Least::new(limit);
            for &i in &items {
                least.offer(i);
            }
            let mut want = items.to_vec();
            want.sort_unstable();
            want.truncate(limit);
            assert_eq!(least.total, items.len() as u64);
            assert_eq!(least.into_sorted(), want, "limit {limit}");
        }
    }

    #[test]
    fn wants_says_what_offer_would_do() {
        let mut least = Least::new(2);
        assert!(least.wants(|_| false));
        least.offer(5);
        least.offer(3);
        assert!(!least.wants(|greatest| 6 < *greatest));
        assert!(least.wants(|greatest| 4 < *greatest));
    }
}
