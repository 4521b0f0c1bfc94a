// TEMP stub until the filter branch merges
pub struct Expr(String);
pub fn parse(s: &str) -> Result<Expr, String> { Ok(Expr(s.to_string())) }
pub fn single_partition(e: &Expr) -> Option<&str> { let s = e.0.strip_prefix("PartitionKey eq '")?; s.split('\'').next() }
pub fn point_filter(pk: &str, rk: &str) -> String { format!("PartitionKey eq '{}' and RowKey eq '{}'", pk.replace('\'', "''"), rk.replace('\'', "''")) }
