//! What a runner makes while it waits for its work, from what the controller's `Welcome`
//! says: the thread that joins the run's cgroup and later starts its commands (the
//! birthplace), the service's part of the sandbox, and, when the run's job is known
//! ahead (a timer's run, a busy job's next), the run's namespaces, which that thread
//! joins. A run then uses what fits its request and drops the rest (dropping the
//! namespaces ends their init), so a request that differs from what was announced only
//! costs the time saved.

use proto::PrivateDir;

use crate::birthplace::Birthplace;
use crate::connection::Welcomed;
use crate::namespaces::{self, Contained, EnterError};
use crate::sandbox;

/// The run's namespaces made ahead: for these private directories, the outcome.
pub type AheadNamespaces = (Vec<PrivateDir>, Result<Contained, EnterError>);

/// What the runner made while it waited (see the module).
#[derive(Debug, Default)]
pub struct MadeAhead {
    birthplace: Option<Birthplace>,
    pub base: Option<sandbox::Base>,
    namespaces: Option<AheadNamespaces>,
}

impl MadeAhead {
    /// Makes what `welcomed` asks for; `walk` is the fork server's walk for the
    /// sandbox, if any (see [`sandbox::Walk`]). Blocking for the sandbox's base and the
    /// namespaces: the runner has nothing else to do meanwhile.
    pub async fn make(welcomed: Welcomed, walk: Option<sandbox::Walk>) -> MadeAhead {
        let mut made = MadeAhead {
            birthplace: start_birthplace(welcomed.cgroup_tasks),
            base: welcomed
                .protected_paths
                .as_deref()
                .map(|paths| sandbox::prepare_base_from(paths, walk.as_ref())),
            ..MadeAhead::default()
        };
        // Its descriptors are not needed any more.
        drop(walk);
        if let Some(dirs) = welcomed.private_dirs {
            made.contain(dirs).await;
        }
        made
    }

    /// Makes the run's namespaces for `dirs` and has the birthplace thread join them,
    /// when the runner makes them itself (privileged) and the thread is in the run's
    /// cgroup; nothing otherwise (the run makes them when it begins).
    async fn contain(&mut self, dirs: Vec<PrivateDir>) {
        if !namespaces::privileged() {
            return;
        }
        let Some(place) = self.birthplace.as_mut() else {
            return;
        };
        if let Err(why) = place.joined().await {
            say_cannot_join(&why);
            self.birthplace = None;
            return;
        }
        let made = namespaces::enter(&dirs, None, Some(place));
        self.namespaces = Some((dirs, made));
    }

    /// The birthplace thread, in the run's cgroup (`procs`: its `cgroup.procs` files),
    /// and the namespaces it joined ahead. No thread when there is none, it could not
    /// join (said on standard error), the run has another cgroup, or the thread joined
    /// namespaces made for other private directories than the run's `private_dirs` (a
    /// reload changed the job meanwhile): each command then joins the run's cgroup by
    /// itself, the runner makes the run's namespaces, and those made ahead are dropped.
    /// What is not handed back ends here, before the run begins: a birthplace thread
    /// left alive would stay in the run's cgroup past the run's report.
    pub async fn birthplace_for(
        self,
        procs: &[String],
        private_dirs: &[PrivateDir],
    ) -> (Option<Birthplace>, Option<Result<Contained, EnterError>>) {
        let MadeAhead {
            birthplace,
            namespaces: made,
            ..
        } = self;
        if made
            .as_ref()
            .is_some_and(|(dirs, _)| dirs.as_slice() != private_dirs)
        {
            return (None, None);
        }
        // Without CAP_SYS_ADMIN the run's namespaces include a user namespace, which a
        // process of two threads cannot join.
        let Some(mut place) =
            birthplace.filter(|place| place.is_for(procs) && namespaces::privileged())
        else {
            return (None, None);
        };
        if let Err(why) = place.joined().await {
            say_cannot_join(&why);
            return (None, None);
        }
        // Refused without CAP_SYS_RESOURCE (some containers): the runner then stays one
        // of the OOM killer's candidates, smaller than most commands.
        let _ = place.shield_from_oom();
        (Some(place), made.map(|(_, outcome)| outcome))
    }
}

/// Says on standard error why the birthplace thread is not used.
fn say_cannot_join(why: &str) {
    eprintln!("svc-runner: warning: {why}; each command joins the run's cgroup itself");
}

/// Starts the thread that joins the run's cgroup ahead when the controller named one
/// (`None` otherwise, or when it cannot start: each command then joins by itself).
fn start_birthplace(cgroup_tasks: Vec<String>) -> Option<Birthplace> {
    if cgroup_tasks.is_empty() {
        return None;
    }
    Birthplace::start(cgroup_tasks)
        .inspect_err(|err| {
            eprintln!("svc-runner: warning: cannot start the birthplace thread: {err}")
        })
        .ok()
}
