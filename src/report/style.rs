//! Minimal ANSI styling: on only when the caller says so, so piped output and `NO_COLOR`
//! stay plain text.

#[derive(Clone, Copy, Debug)]
pub struct Style {
    pub on: bool,
}

impl Style {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    pub fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    pub fn red(&self, s: &str) -> String {
        self.wrap("1;31", s)
    }
    pub fn green(&self, s: &str) -> String {
        self.wrap("1;32", s)
    }
    pub fn yellow(&self, s: &str) -> String {
        self.wrap("33", s)
    }
    pub fn cyan(&self, s: &str) -> String {
        self.wrap("36", s)
    }
    pub fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
}
