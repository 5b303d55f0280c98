//! Passes simba-sys's library directory on as an rpath for this crate's own
//! tests, examples and doc tests, and to dependents' build scripts as
//! `DEP_SIMBA_RS_LIB_DIR` (link args of a dependency never reach a dependent's
//! binaries, and `DEP_*` only reaches direct dependents).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_SIMBA_ROOT");
    if let Ok(dir) = std::env::var("DEP_SIMBA_ROOT") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        println!("cargo:lib_dir={dir}");
    }
}
