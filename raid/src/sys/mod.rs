//! The crate's `unsafe` room: SIMD XOR kernels, the io_uring executor and a poller's own ring, and (feature `isal`)
//! the ISA-L declarations used by the parity benchmark, and (feature `gpu`) CUDA for the GPU
//! parity engine. Everything else in the crate is safe
//! code; each submodule states the invariants its `unsafe` blocks rely on.

pub mod buf;

pub mod xor;

pub mod uring;

pub mod ring;

#[cfg(feature = "isal")]
pub mod isal;

#[cfg(feature = "gpu")]
pub mod gpu;
