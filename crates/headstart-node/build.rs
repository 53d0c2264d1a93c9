//! Node-API link settings for the addon (napi-build's setup: on Linux, nothing beyond what the cdylib needs).
fn main() {
    napi_build::setup();
}
