//! Plans: `plan_submit` (the Go SDK's plan.go). A task names the effects
//! it intends, each the exact call it will make; a person approves them
//! once, shown whole; each later call whose effect is exactly one unused
//! item is then allowed without a question of its own, once.

use crate::json::Object;
use crate::{check, sys, Cap, Error};

/// One effect of a plan (abi.PlanItem): the operation `op` of `cap` with
/// the argument document `args` (one JSON value, as `Cap::call` will get
/// it).
#[derive(Clone, Debug)]
pub struct PlanItem {
    pub cap: Cap,
    pub op: String,
    pub args: String,
}

/// Asks the person, once, to approve every item (host call `plan_submit`).
/// `EAPPROVAL`: the person said no; `EDENIED`: an item is refused as the
/// call would be, or its capability does not allow plans
/// (`approve_plans`).
pub fn submit_plan(items: &[PlanItem]) -> Result<(), Error> {
    let mut a = String::from("[");
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            a.push(',');
        }
        let o = Object::new()
            .num("cap", it.cap.handle() as u64)
            .str("op", &it.op)
            .raw("args", &it.args);
        a.push_str(&o.finish());
    }
    a.push(']');
    let req = Object::new().raw("items", &a).finish();
    check("plan_submit", sys::plan_submit(req.as_bytes()), 0).map(|_| ())
}
