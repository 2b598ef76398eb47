//! The QPACK dynamic table (RFC 9204 §3.2), one type for the encoder's copy and the
//! decoder's: entries in insertion order, addressed by absolute index (the first entry ever
//! inserted is 0), evicted oldest first. Its size counts every entry as name + value + 32
//! bytes, as the RFC does, so the memory it holds is bounded by its capacity (each entry's
//! 32 counted bytes pay for its own bookkeeping, see [`ENTRY_OVERHEAD`]).

use std::collections::VecDeque;

/// What RFC 9204 §3.2.1 adds to an entry's name and value lengths for its size.
pub const ENTRY_OVERHEAD: u64 = 32;

/// One entry: name and value in one allocation, split at `name_len`.
#[derive(Debug, Clone)]
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn size(&self) -> u64 {
        self.bytes.len() as u64 + ENTRY_OVERHEAD
    }
}

/// The size an entry of this name and value takes in a table.
pub fn entry_size(name: &[u8], value: &[u8]) -> u64 {
    (name.len() + value.len()) as u64 + ENTRY_OVERHEAD
}

/// A dynamic table: entries by absolute index, its size and capacity.
#[derive(Debug, Default, Clone)]
pub struct DynamicTable {
    entries: VecDeque<Entry>,
    /// Absolute index of `entries[0]`: how many entries were evicted so far.
    dropped: u64,
    size: u64,
    capacity: u64,
}

impl DynamicTable {
    /// An empty table of capacity 0 (the state before any Set Dynamic Table Capacity).
    pub fn new() -> DynamicTable {
        DynamicTable::default()
    }

    /// How many entries were ever inserted (the Insert Count).
    pub fn insert_count(&self) -> u64 {
        self.dropped + self.entries.len() as u64
    }

    /// Absolute index of the oldest entry still in the table (== insert count when empty).
    pub fn first(&self) -> u64 {
        self.dropped
    }

    /// The table's size (sum of entry sizes).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The table's capacity.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry at absolute index `abs`, if it is in the table (not evicted, not yet
    /// inserted).
    pub fn get(&self, abs: u64) -> Option<(&[u8], &[u8])> {
        let i = usize::try_from(abs.checked_sub(self.dropped)?).ok()?;
        let e = self.entries.get(i)?;
        Some(e.bytes.split_at(e.name_len))
    }

    /// The absolute index of the newest entry equal to `name`/`value` (`.0`), and of the
    /// newest entry with that name (`.1`), at or after absolute index `from`.
    pub fn find(&self, name: &[u8], value: &[u8], from: u64) -> (Option<u64>, Option<u64>) {
        let mut by_name = None;
        for (i, e) in self.entries.iter().enumerate().rev() {
            let abs = self.dropped + i as u64;
            if abs < from {
                break;
            }
            let (n, v) = e.bytes.split_at(e.name_len);
            if n == name {
                if v == value {
                    return (Some(abs), by_name.or(Some(abs)));
                }
                by_name.get_or_insert(abs);
            }
        }
        (None, by_name)
    }

    /// The absolute index of the first entry that survives making `need` bytes of room (all
    /// entries before it are evicted), or `None` when even an empty table has no room.
    pub fn first_after_room(&self, need: u64) -> Option<u64> {
        if need > self.capacity {
            return None;
        }
        let mut size = self.size;
        let mut abs = self.dropped;
        for e in &self.entries {
            if size + need <= self.capacity {
                break;
            }
            size -= e.size();
            abs += 1;
        }
        Some(abs)
    }

    /// Inserts an entry, evicting the oldest entries to make room. Returns its absolute index,
    /// or `None` (table unchanged) when the entry is larger than the capacity.
    pub fn insert(&mut self, name: &[u8], value: &[u8]) -> Option<u64> {
        let need = entry_size(name, value);
        if need > self.capacity {
            return None;
        }
        self.evict_to(self.capacity - need);
        let mut bytes = Vec::with_capacity(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.entries.push_back(Entry {
            bytes: bytes.into_boxed_slice(),
            name_len: name.len(),
        });
        self.size += need;
        Some(self.insert_count() - 1)
    }

    /// Sets the capacity, evicting the oldest entries until the size fits.
    pub fn set_capacity(&mut self, capacity: u64) {
        self.capacity = capacity;
        self.evict_to(capacity);
    }

    /// Evicts the oldest entries until the size is at most `target`.
    fn evict_to(&mut self, target: u64) {
        while self.size > target {
            let Some(e) = self.entries.pop_front() else {
                break;
            };
            self.size -= e.size();
            self.dropped += 1;
        }
        if self.entries.is_empty() {
            // Give a table emptied by a capacity of 0 its memory back.
            self.entries.shrink_to(4);
        }
    }

    /// Bytes of entry content held (names and values), for memory accounting.
    pub fn content_bytes(&self) -> usize {
        self.entries.iter().map(|e| e.bytes.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_evicts_oldest_and_indexes_absolutely() {
        let mut t = DynamicTable::new();
        assert_eq!(t.insert(b"a", b"b"), None, "capacity 0 holds nothing");
        t.set_capacity(100);
        assert_eq!(t.insert(b"n1", b"v1"), Some(0)); // 36
        assert_eq!(t.insert(b"n2", b"v2"), Some(1)); // 72
        assert_eq!(t.get(0), Some((&b"n1"[..], &b"v1"[..])));
        // A third 36-byte entry evicts the first.
        assert_eq!(t.first_after_room(36), Some(1));
        assert_eq!(t.insert(b"n3", b"v3"), Some(2));
        assert_eq!((t.first(), t.insert_count(), t.size()), (1, 3, 72));
        assert_eq!(t.get(0), None);
        assert_eq!(t.get(3), None);
        assert_eq!(t.find(b"n3", b"v3", 0), (Some(2), Some(2)));
        assert_eq!(t.find(b"n2", b"x", 0), (None, Some(1)));
        assert_eq!(t.find(b"n2", b"v2", 2), (None, None));
        // Larger than the capacity: refused, nothing evicted.
        assert_eq!(t.insert(&[b'x'; 70], b""), None);
        assert_eq!(t.len(), 2);
        assert_eq!(t.first_after_room(101), None);
        t.set_capacity(40);
        assert_eq!((t.first(), t.len(), t.size()), (2, 1, 36));
        t.set_capacity(0);
        assert!(t.is_empty());
        assert_eq!(t.insert_count(), 3);
    }
}
