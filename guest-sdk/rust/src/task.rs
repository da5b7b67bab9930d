//! Child tasks: `task_spawn`, `task_wait`, `task_kill` (the Go SDK's
//! task.go).

use crate::json::{self, Object};
use crate::{check, sys, Blob, Cap, Error};

/// A handle to a child task this task spawned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Task(u32);

/// One capability passed to a child (abi.SpawnCap): derived anew from
/// `cap` for the child, narrowed by `narrow` (a narrowing request, JSON)
/// when given, and held by the child under `name`.
#[derive(Clone, Debug)]
pub struct SpawnCap {
    pub cap: Cap,
    pub name: String,
    pub narrow: Option<String>,
}

/// The request of `task_spawn` (abi.SpawnRequest).
#[derive(Clone, Debug, Default)]
pub struct SpawnRequest {
    /// The child's module digest, "sha256:<hex>"; the spawn capability
    /// must allow it.
    pub module: String,
    /// A blob that becomes the child's input.
    pub input: Option<Blob>,
    /// The capabilities the child gets.
    pub caps: Vec<SpawnCap>,
    /// The child's memory, e.g. "32MiB"; `None`: the most it may get.
    pub memory: Option<String>,
    /// The child's timeout, e.g. "10s"; `None`: the most it may get.
    pub timeout: Option<String>,
    /// The confidentiality tags the child may ever hold; `None`: the
    /// parent's, an empty list: public data only.
    pub clearance: Option<Vec<String>>,
}

impl SpawnRequest {
    /// The request as the kernel reads it (JSON).
    pub fn encode(&self) -> String {
        let mut o = Object::new().str("module", &self.module);
        if let Some(b) = self.input {
            o = o.num("input", b.handle() as u64);
        }
        if !self.caps.is_empty() {
            let mut a = String::from("[");
            for (i, c) in self.caps.iter().enumerate() {
                if i > 0 {
                    a.push(',');
                }
                let mut co = Object::new().num("handle", c.cap.handle() as u64).str("name", &c.name);
                if let Some(n) = &c.narrow {
                    co = co.raw("narrow", n);
                }
                a.push_str(&co.finish());
            }
            a.push(']');
            o = o.raw("caps", &a);
        }
        if let Some(m) = &self.memory {
            o = o.str("memory", m);
        }
        if let Some(t) = &self.timeout {
            o = o.str("timeout", t);
        }
        if let Some(c) = &self.clearance {
            o = o.raw("clearance", &json::str_array(c));
        }
        o.finish()
    }
}

/// Starts a child task under the spawn capability `sc`. The child gets
/// only what is passed, each capability derived anew (and narrowed when
/// asked), starts at this task's label, and gets no more memory or time
/// than this task has.
pub fn spawn(sc: Cap, req: &SpawnRequest) -> Result<Task, Error> {
    let mut out = 0;
    let code = sys::task_spawn(sc.handle(), req.encode().as_bytes(), &mut out);
    check("task_spawn", code, out).map(Task)
}

impl Task {
    /// Wraps a raw handle.
    pub fn from_handle(h: u32) -> Task {
        Task(h)
    }

    /// The raw handle.
    pub fn handle(self) -> u32 {
        self.0
    }

    /// Blocks until the child ends and returns its result blob (`None`
    /// when it set none). A child that failed, was killed or ran out of a
    /// limit is `ECHILD`.
    pub fn wait(self) -> Result<Option<Blob>, Error> {
        let mut out = 0;
        let code = sys::task_wait(self.0, &mut out);
        check("task_wait", code, out).map(|h| if h == 0 { None } else { Some(Blob::from_handle(h)) })
    }

    /// Stops the child.
    pub fn kill(self) -> Result<(), Error> {
        check("task_kill", sys::task_kill(self.0), 0).map(|_| ())
    }

    /// Removes the child's handle from this task's table (the child keeps
    /// running).
    pub fn drop_handle(self) -> Result<(), Error> {
        crate::drop_handle(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode() {
        let r = SpawnRequest {
            module: "sha256:ab".into(),
            input: Some(Blob::from_handle(5)),
            caps: vec![SpawnCap { cap: Cap::from_handle(3), name: "search".into(), narrow: Some(r#"{"paths":["/search"]}"#.into()) }],
            memory: Some("32MiB".into()),
            timeout: Some("10s".into()),
            clearance: Some(vec![]),
        };
        assert_eq!(
            r.encode(),
            r#"{"module":"sha256:ab","input":5,"caps":[{"handle":3,"name":"search","narrow":{"paths":["/search"]}}],"memory":"32MiB","timeout":"10s","clearance":[]}"#
        );
    }
}
