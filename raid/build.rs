//! Links Debian's libisal only when the `isal` feature is on (the parity benchmark's
//! reference); default builds need nothing from the system.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_ISAL").is_some() {
        println!("cargo:rustc-link-lib=isal");
    }
}
