//! Where a configured array's running [`Array`] lives, and what is known of an array that did
//! not assemble at start-up.
//!
//! An array whose assembly the RAID engine refuses (an uncovered unclean degraded stop, two
//! members missing, …) does not stop the daemon: it is recorded with the reason
//! ([`Refusal`]), its namespaces are configured but inactive (their identifiers and capacity
//! come from the superblocks, [`StoredArray`]), and its [`ArraySlot`] stays empty until the
//! operator's `raidline array start` assembles it. The slot is set once and never emptied, so
//! whoever saw the array keeps seeing it.

use std::sync::{Arc, OnceLock};

use raidline_raid::superblock::SlotState;
use raidline_raid::{Array, Geometry, Uuid, WriteHolePolicy};

/// A configured array's running [`Array`], once assembled: at start-up, or later by
/// `raidline array start`. Namespaces of an array that did not assemble hold the slot
/// ([`super::Backend::Pending`]) and serve from it once it is set.
#[derive(Debug)]
pub struct ArraySlot {
    array: OnceLock<Arc<Array>>,
    /// The layout the array has (or, while empty, the one its superblocks record).
    geometry: Option<Geometry>,
}

impl ArraySlot {
    /// A slot holding `array`.
    pub fn running(array: Arc<Array>) -> ArraySlot {
        let geometry = Some(*array.geometry());
        let slot = OnceLock::new();
        let _ = slot.set(array);
        ArraySlot {
            array: slot,
            geometry,
        }
    }

    /// An empty slot for an array whose superblocks record `geometry` (`None`: unknown).
    pub fn waiting(geometry: Option<Geometry>) -> ArraySlot {
        ArraySlot {
            array: OnceLock::new(),
            geometry,
        }
    }

    /// The running array, if it runs.
    pub fn get(&self) -> Option<&Arc<Array>> {
        self.array.get()
    }

    /// The array's layout: the running array's, else what its superblocks recorded.
    pub fn geometry(&self) -> Option<Geometry> {
        self.get().map(|a| *a.geometry()).or(self.geometry)
    }

    /// Puts `array` in the slot; gives it back if the slot was already set.
    pub(crate) fn set(&self, array: Arc<Array>) -> Result<(), Arc<Array>> {
        self.array.set(array)
    }
}

/// What the members' superblocks record about an array that did not assemble (the newest
/// superblock among the readable ones of the array most of them belong to).
#[derive(Clone, Debug, PartialEq)]
pub struct StoredArray {
    /// Array UUID (namespace identifiers and the serial derive from it).
    pub uuid: Uuid,
    /// Layout.
    pub geometry: Geometry,
    /// Per role: the candidate device whose superblock says it holds the role (`None`: no
    /// candidate does), and the role's state in the newest member table.
    pub roles: Vec<(Option<String>, SlotState)>,
    /// The recorded write-hole policy.
    pub write_hole_policy: WriteHolePolicy,
    /// Whether the partial-parity log is switched on.
    pub write_hole_protection: bool,
}

/// Why an array is not running, and what is known of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// The engine's reason (its error message), as the operator reads it.
    pub reason: String,
    /// What the superblocks record, when any was readable.
    pub stored: Option<StoredArray>,
}

/// A configured array that did not assemble at start-up (see the module documentation).
#[derive(Debug)]
pub struct RefusedArray {
    /// Configured name.
    pub name: String,
    /// Its (empty) slot, shared with its namespaces' [`super::Backend::Pending`].
    pub slot: Arc<ArraySlot>,
    /// Why, and what is known.
    pub refusal: Refusal,
    /// Its configuration, to assemble it again on `raidline array start`.
    pub config: crate::config::ArrayConfig,
    /// Rebuild/resync/scrub throttle once it runs, bytes per second.
    pub rebuild_bytes_per_sec: u64,
}
