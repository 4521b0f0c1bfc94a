pub struct DemoEnv {
    pub emulator: crate::emulator::Emulator,
    pub connection_string: String,
}
pub async fn prepare(_p: &mut (dyn FnMut(&str) + Send)) -> Result<DemoEnv, String> {
    Err("stub".into())
}
