//! Passes simba-sys's library directory on as an rpath for this crate's own
//! tests, examples and doc tests (a dependency's link args do not propagate).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_SIMBA_ROOT");
    if let Ok(dir) = std::env::var("DEP_SIMBA_ROOT") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
