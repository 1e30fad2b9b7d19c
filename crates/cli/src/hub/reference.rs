//! `org/repo[:QUANT]`: a model on the Hugging Face hub named as `llama-server -hf` names it.
//!
//! A repository id is two names joined by one `/`; each name is made of ASCII letters, digits
//! and `_`, with `.` and `-` allowed only between them (the hub's own rule, also llama.cpp's).
//! The quantisation is a tag such as `Q4_K_M` (letters, digits, `_`), matched case-insensitively
//! against the file names. A name ending in `.gguf` is never a repository: it is taken for a
//! file path with a typo, so that a missing local file is not looked up on the network.

use std::fmt;

/// The longest repository id accepted.
const MAX_REPO_LEN: usize = 256;
/// The longest quantisation tag accepted.
const MAX_QUANT_LEN: usize = 32;

/// A model on the hub: its repository and, when given, the quantisation to pick.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubModel {
    /// `org/repo`.
    pub repo: String,
    /// The quantisation tag as given (`Q4_K_M`), or `None` for the default choice.
    pub quant: Option<String>,
}

impl HubModel {
    /// Parses `org/repo` or `org/repo:QUANT`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (repo, quant) = match text.split_once(':') {
            Some((repo, quant)) => (repo, Some(quant)),
            None => (text, None),
        };
        check_repo(repo)?;
        if let Some(quant) = quant {
            check_quant(quant)?;
        }
        Ok(Self {
            repo: repo.to_owned(),
            quant: quant.map(str::to_owned),
        })
    }

    /// The cache's directory name of the repository: `models--org--repo`.
    pub fn folder_name(&self) -> String {
        format!("models--{}", self.repo.replace('/', "--"))
    }
}

impl fmt::Display for HubModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.quant {
            Some(quant) => write!(f, "{}:{quant}", self.repo),
            None => f.write_str(&self.repo),
        }
    }
}

fn check_repo(repo: &str) -> Result<(), String> {
    if repo.is_empty() || repo.len() > MAX_REPO_LEN {
        return Err(format!(
            "a hub repository id has 1 to {MAX_REPO_LEN} characters"
        ));
    }
    if repo.to_ascii_lowercase().ends_with(".gguf") {
        return Err(format!("`{repo}` names a file, not a hub repository"));
    }
    if repo.matches('/').count() != 1 {
        return Err(format!("`{repo}` is not of the form org/repo"));
    }
    let mut after_separator = true;
    for c in repo.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            after_separator = false;
        } else if matches!(c, '/' | '.' | '-') && !after_separator {
            after_separator = true;
        } else {
            return Err(format!(
                "`{repo}` is not a hub repository id (letters, digits and `_`, with `.`, `-` \
                 and one `/` only between them)"
            ));
        }
    }
    if after_separator {
        return Err(format!("`{repo}` ends with a separator"));
    }
    Ok(())
}

fn check_quant(quant: &str) -> Result<(), String> {
    let valid = !quant.is_empty()
        && quant.len() <= MAX_QUANT_LEN
        && quant.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{quant}` is not a quantisation tag (such as Q4_K_M: at most {MAX_QUANT_LEN} \
             letters, digits and `_`)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_ids_and_tags_parse_as_the_hub_writes_them() {
        let model = HubModel::parse("unsloth/Qwen3-0.6B-GGUF:Q4_K_M").unwrap();
        assert_eq!(model.repo, "unsloth/Qwen3-0.6B-GGUF");
        assert_eq!(model.quant.as_deref(), Some("Q4_K_M"));
        assert_eq!(model.folder_name(), "models--unsloth--Qwen3-0.6B-GGUF");
        assert_eq!(model.to_string(), "unsloth/Qwen3-0.6B-GGUF:Q4_K_M");
        assert_eq!(HubModel::parse("a/b").unwrap().quant, None);
    }

    #[test]
    fn paths_and_malformed_names_are_not_repositories() {
        for text in [
            "model.gguf",
            "dir/model.gguf",
            "./a/b",
            "/abs/path",
            "a/b/c",
            "a//b",
            "a/b-",
            "a/../b",
            "a/b:",
            "a/b:Q4 K",
            "a/b:Q4_K_M:x",
            "a b/c",
            "",
        ] {
            assert!(HubModel::parse(text).is_err(), "{text}");
        }
    }
}
