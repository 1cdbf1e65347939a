//! The activation stack: which skills are active, outermost first, with cycles and
//! over-deep nesting refused before anything is loaded.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ba_protocol::{DEFAULT_MAX_SKILL_DEPTH, SkillActivationRequest};

use crate::error::{Result, SkillsError};

/// Checks that `skill` may be activated on top of `chain` (outermost first): it must not be in
/// the chain already (a direct or indirect cycle) and the chain must be shorter than
/// `max_depth`.
///
/// ```
/// use ba_skills::check_activation;
/// let chain = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
/// let err = check_activation(&chain, "a", 5).unwrap_err();
/// assert_eq!(err.to_string(), "skill activation cycle refused: a → b → c → a");
/// ```
pub fn check_activation(chain: &[String], skill: &str, max_depth: u32) -> Result<()> {
    if chain.iter().any(|s| s == skill) {
        let mut path = chain.to_vec();
        path.push(skill.to_owned());
        return Err(SkillsError::Cycle { path });
    }
    if chain.len() >= max_depth as usize {
        return Err(SkillsError::DepthExceeded {
            skill: skill.to_owned(),
            chain: chain.to_vec(),
            max_depth,
        });
    }
    Ok(())
}

/// Checks a request's own chain and depth (the stateless form of [`ActivationStack::push`]).
pub fn check_request(request: &SkillActivationRequest) -> Result<()> {
    check_activation(&request.chain, &request.skill, request.max_depth)?;
    if request.depth >= request.max_depth {
        return Err(SkillsError::DepthExceeded {
            skill: request.skill.clone(),
            chain: request.chain.clone(),
            max_depth: request.max_depth,
        });
    }
    Ok(())
}

/// One active skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Id of the activation.
    pub activation_id: String,
    /// The skill.
    pub skill: String,
}

/// The skills active in one conversation. Cloning gives another handle to the same stack.
#[derive(Debug, Clone)]
pub struct ActivationStack {
    frames: Arc<Mutex<Vec<Frame>>>,
    max_depth: u32,
}

impl Default for ActivationStack {
    fn default() -> Self {
        Self::new()
    }
}

fn lock(frames: &Mutex<Vec<Frame>>) -> MutexGuard<'_, Vec<Frame>> {
    // A panic while the lock is held cannot leave a half-written Vec (every change is one push
    // or one truncate), so the data is still good after poisoning.
    frames.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ActivationStack {
    /// An empty stack with the default depth limit (3).
    pub fn new() -> Self {
        Self::with_max_depth(DEFAULT_MAX_SKILL_DEPTH)
    }

    /// An empty stack allowing `max_depth` nested activations.
    pub fn with_max_depth(max_depth: u32) -> Self {
        Self {
            frames: Arc::new(Mutex::new(Vec::new())),
            max_depth,
        }
    }

    /// The depth limit.
    pub fn max_depth(&self) -> u32 {
        self.max_depth
    }

    /// Pushes `skill` with a fresh activation id. The returned guard pops it (and anything
    /// pushed after it) when dropped, so an error or a panic unwinding through the caller
    /// leaves the stack as it was.
    pub fn push(&self, skill: &str) -> Result<ActivationGuard> {
        self.push_with_id(skill, uuid::Uuid::new_v4().to_string())
    }

    /// Pushes `skill` under a given activation id (for example the id of a
    /// [`ba_protocol::SkillActivationResult`]).
    pub fn push_with_id(&self, skill: &str, activation_id: String) -> Result<ActivationGuard> {
        let mut frames = lock(&self.frames);
        let chain: Vec<String> = frames.iter().map(|f| f.skill.clone()).collect();
        check_activation(&chain, skill, self.max_depth)?;
        frames.push(Frame {
            activation_id: activation_id.clone(),
            skill: skill.to_owned(),
        });
        Ok(ActivationGuard {
            frames: Arc::clone(&self.frames),
            activation_id,
            skill: skill.to_owned(),
        })
    }

    /// The active skills, outermost first.
    pub fn chain(&self) -> Vec<String> {
        lock(&self.frames).iter().map(|f| f.skill.clone()).collect()
    }

    /// The active frames, outermost first.
    pub fn frames(&self) -> Vec<Frame> {
        lock(&self.frames).clone()
    }

    /// How many skills are active.
    pub fn depth(&self) -> usize {
        lock(&self.frames).len()
    }

    /// A request for `skill` nested under the current chain.
    pub fn request(&self, skill: &str, load_level: u8) -> SkillActivationRequest {
        let chain = self.chain();
        SkillActivationRequest {
            skill: skill.to_owned(),
            load_level,
            depth: u32::try_from(chain.len()).unwrap_or(u32::MAX),
            max_depth: self.max_depth,
            chain,
        }
    }
}

/// An active skill; dropping it pops the activation.
#[derive(Debug)]
#[must_use = "dropping the guard ends the activation at once"]
pub struct ActivationGuard {
    frames: Arc<Mutex<Vec<Frame>>>,
    activation_id: String,
    skill: String,
}

impl ActivationGuard {
    /// Id of the activation.
    pub fn activation_id(&self) -> &str {
        &self.activation_id
    }

    /// The skill.
    pub fn skill(&self) -> &str {
        &self.skill
    }

    /// Ends the activation now (the same as dropping the guard).
    pub fn finish(self) {}
}

impl Drop for ActivationGuard {
    fn drop(&mut self) {
        let mut frames = lock(&self.frames);
        // Frames above this one are nested activations whose guards leaked or were dropped out
        // of order; they cannot outlive their parent.
        if let Some(at) = frames
            .iter()
            .position(|f| f.activation_id == self.activation_id)
        {
            frames.truncate(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cycle_path(err: SkillsError) -> Vec<String> {
        match err {
            SkillsError::Cycle { path } => path,
            other => panic!("expected a cycle, got {other}"),
        }
    }

    #[test]
    fn direct_cycle() {
        let stack = ActivationStack::new();
        let _a = stack.push("a").unwrap();
        let err = stack.push("a").unwrap_err();
        assert_eq!(err.to_string(), "skill activation cycle refused: a → a");
        assert_eq!(stack.chain(), ["a"]);
    }

    #[test]
    fn indirect_cycles_carry_the_full_path() {
        let stack = ActivationStack::with_max_depth(10);
        let _a = stack.push("a").unwrap();
        let _b = stack.push("b").unwrap();
        assert_eq!(cycle_path(stack.push("a").unwrap_err()), ["a", "b", "a"]);
        let _c = stack.push("c").unwrap();
        let err = stack.push("a").unwrap_err();
        assert_eq!(
            err.to_string(),
            "skill activation cycle refused: a → b → c → a"
        );
        assert_eq!(cycle_path(err), ["a", "b", "c", "a"]);
        assert_eq!(stack.chain(), ["a", "b", "c"]);
    }

    #[test]
    fn depth_limit_three() {
        let stack = ActivationStack::new();
        let _a = stack.push("a").unwrap();
        let _b = stack.push("b").unwrap();
        let _c = stack.push("c").unwrap();
        let err = stack.push("d").unwrap_err();
        assert!(matches!(
            err,
            SkillsError::DepthExceeded { max_depth: 3, .. }
        ));
        assert_eq!(
            err.to_string(),
            "activating skill `d` would exceed the nesting limit of 3 (active: a → b → c)"
        );
        drop(_c);
        assert!(stack.push("d").is_ok());
    }

    #[test]
    fn guard_pops_on_error_and_on_panic() {
        let stack = ActivationStack::new();
        let failing = |stack: &ActivationStack| -> Result<()> {
            let _guard = stack.push("a")?;
            let _inner = stack.push("b")?;
            let _cycle = stack.push("a")?; // the error leaves through both guards
            Ok(())
        };
        assert!(failing(&stack).is_err());
        assert_eq!(stack.depth(), 0);

        let handle = stack.clone();
        let outcome = std::panic::catch_unwind(move || {
            let _guard = handle.push("a").unwrap();
            panic!("skill failed");
        });
        assert!(outcome.is_err());
        assert_eq!(stack.depth(), 0);
        assert!(
            stack.push("a").is_ok(),
            "the stack stays usable after a panic"
        );
    }

    #[test]
    fn dropping_a_parent_pops_leaked_children() {
        let stack = ActivationStack::new();
        let a = stack.push("a").unwrap();
        let b = stack.push("b").unwrap();
        std::mem::forget(b);
        assert_eq!(stack.depth(), 2);
        a.finish();
        assert_eq!(stack.depth(), 0);
    }

    #[test]
    fn ids_are_unique_and_requests_carry_the_chain() {
        let stack = ActivationStack::new();
        let a = stack.push("a").unwrap();
        let b = stack.push("b").unwrap();
        assert_ne!(a.activation_id(), b.activation_id());
        assert_eq!(stack.frames()[1].activation_id, b.activation_id());
        let req = stack.request("c", 2);
        assert_eq!(req.chain, ["a", "b"]);
        assert_eq!(req.depth, 2);
        assert!(check_request(&req).is_ok());
        let req = stack.request("a", 2);
        assert_eq!(
            check_request(&req).unwrap_err().to_string(),
            "skill activation cycle refused: a → b → a"
        );
        let mut deep = SkillActivationRequest::new("z");
        deep.depth = 3;
        assert!(matches!(
            check_request(&deep),
            Err(SkillsError::DepthExceeded { .. })
        ));
    }
}
