//! A generational slab: values addressed by a `u64` key that packs a slot index (low 32 bits) and
//! the slot's generation (high 32 bits), so a key kept after its value was removed never reaches
//! the slot's next occupant. Keys are what the ring carries as `user_data` and what the loop hands
//! out as connection, listener, timer and watch ids.

pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Never produced by [`Slab::insert`]: generations start at 1, and this key has generation
/// `u32::MAX` which a slot would need four billion reuses to reach.
pub(crate) const NO_KEY: u64 = u64::MAX;

impl<T> Slab<T> {
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn insert(&mut self, value: T) -> u64 {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len()).expect("below 2^32 slab slots");
                self.slots.push(Slot {
                    generation: 0,
                    value: None,
                });
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        assert!(slot.value.is_none(), "free list held an occupied slot");
        // Skip u32::MAX so that no key ever equals NO_KEY.
        slot.generation = match slot.generation.wrapping_add(1) {
            u32::MAX => 1,
            g => g,
        };
        slot.value = Some(value);
        self.len += 1;
        (u64::from(slot.generation) << 32) | u64::from(index)
    }

    fn slot_index(&self, key: u64) -> Option<usize> {
        let index = (key & 0xffff_ffff) as usize;
        let generation = (key >> 32) as u32;
        let slot = self.slots.get(index)?;
        (slot.generation == generation && slot.value.is_some()).then_some(index)
    }

    pub(crate) fn get(&self, key: u64) -> Option<&T> {
        let index = self.slot_index(key)?;
        self.slots[index].value.as_ref()
    }

    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut T> {
        let index = self.slot_index(key)?;
        self.slots[index].value.as_mut()
    }

    pub(crate) fn remove(&mut self, key: u64) -> Option<T> {
        let index = self.slot_index(key)?;
        let value = self.slots[index].value.take();
        assert!(value.is_some());
        self.free.push(index as u32);
        self.len -= 1;
        value
    }

    /// Every occupied key, in slot order (deterministic).
    pub(crate) fn keys(&self) -> Vec<u64> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.value.is_some())
            .map(|(i, s)| (u64::from(s.generation) << 32) | i as u64)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_keys_miss_the_slot_reuse() {
        let mut slab = Slab::new();
        let a = slab.insert("a");
        assert_eq!(slab.remove(a), Some("a"));
        let b = slab.insert("b");
        assert_eq!(a & 0xffff_ffff, b & 0xffff_ffff, "slot reused");
        assert_ne!(a, b);
        assert!(slab.get(a).is_none());
        assert_eq!(slab.get(b), Some(&"b"));
        assert!(slab.remove(a).is_none());
        assert_eq!(slab.len(), 1);
        assert_eq!(slab.keys(), vec![b]);
        assert!(slab.get(NO_KEY).is_none());
    }
}
