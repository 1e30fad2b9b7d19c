//! Which files of a repository make up the model `org/repo[:QUANT]` names, as llama.cpp's
//! `-hf` chooses them.
//!
//! Only model GGUF files count: a `.gguf` whose file name does not contain `mmproj`, `imatrix`,
//! `mtp-`, `eagle3-`, `dflash-` or `dspark-` (projectors, importance matrices and draft heads
//! that sit beside the weights). A file has the quantisation `TAG` when its path contains `TAG`
//! followed by `.` or `-`, ignoring case, and not preceded by a letter or digit (so `Q4_0` does
//! not match `IQ4_0`). Without a tag the choice is Q4_K_M, else Q8_0, else the first model file
//! in the listing's order. The first match in the listing wins.
//!
//! A split model is `PREFIX-00001-of-00003.gguf` … `PREFIX-00003-of-00003.gguf`: only its first
//! shard can be chosen, and the model is then every shard of the same prefix and count, in
//! order; a listing that lacks one of them is an error rather than half a model.

/// File-name parts that mark a GGUF beside the model rather than the model itself.
const NOT_MODEL: [&str; 6] = ["mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"];

/// The quantisations tried, in order, when none is given.
pub const DEFAULT_QUANTS: [&str; 2] = ["Q4_K_M", "Q8_0"];

/// The most shards a split model may have (the naming allows five digits).
const MAX_SHARDS: u32 = 99_999;

/// The paths of the model's files in `paths`, shards in order; an error names what is
/// missing and lists the model files there are.
pub fn choose<'a>(paths: &[&'a str], quant: Option<&str>) -> Result<Vec<&'a str>, String> {
    let models: Vec<&str> = paths.iter().copied().filter(|p| is_model(p)).collect();
    if models.is_empty() {
        return Err("it holds no GGUF model file".into());
    }
    let first_shard = |p: &&str| split_of(p).is_none_or(|s| s.index == 1);
    let primary = match quant {
        Some(tag) => models
            .iter()
            .copied()
            .filter(first_shard)
            .find(|p| has_quant(p, tag)),
        None => DEFAULT_QUANTS
            .iter()
            .find_map(|tag| {
                models
                    .iter()
                    .copied()
                    .filter(first_shard)
                    .find(|p| has_quant(p, tag))
            })
            .or_else(|| models.iter().copied().find(first_shard)),
    };
    let Some(primary) = primary else {
        let what = match quant {
            Some(tag) => format!("no GGUF file of quantisation {tag}"),
            None => "no whole model or first shard of a split model".to_owned(),
        };
        return Err(format!(
            "it has {what}; its model files are: {}",
            listing(&models)
        ));
    };
    let Some(split) = split_of(primary) else {
        return Ok(vec![primary]);
    };
    (1..=split.count)
        .map(|index| {
            models
                .iter()
                .copied()
                .find(|p| {
                    split_of(p).is_some_and(|s| {
                        s.prefix == split.prefix && s.count == split.count && s.index == index
                    })
                })
                .ok_or_else(|| {
                    format!(
                        "{primary} is shard 1 of {}, but shard {index} is not listed",
                        split.count
                    )
                })
        })
        .collect()
}

/// Up to 20 of `models`, comma-separated, with a count of the rest.
fn listing(models: &[&str]) -> String {
    const SHOWN: usize = 20;
    let mut text = models
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if models.len() > SHOWN {
        text.push_str(&format!(" and {} more", models.len() - SHOWN));
    }
    text
}

fn is_model(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.to_ascii_lowercase().ends_with(".gguf") && !NOT_MODEL.iter().any(|m| name.contains(m))
}

fn has_quant(path: &str, tag: &str) -> bool {
    let path = path.to_ascii_lowercase();
    let tag = tag.to_ascii_lowercase();
    path.match_indices(&tag).any(|(at, _)| {
        let before = path[..at].chars().next_back();
        let after = path[at + tag.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric()) && matches!(after, Some('.' | '-'))
    })
}

/// Where a shard sits in a split model.
#[derive(Debug, PartialEq, Eq)]
struct Split<'a> {
    prefix: &'a str,
    index: u32,
    count: u32,
}

/// `PREFIX-00002-of-00003.gguf` → prefix, 2, 3; `None` for an unsplit file or an impossible
/// numbering (index 0, past the count, or more than [`MAX_SHARDS`]).
fn split_of(path: &str) -> Option<Split<'_>> {
    let stem = path.get(..path.len().checked_sub(".gguf".len())?)?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, index) = rest.rsplit_once('-')?;
    let number = |digits: &str| {
        (digits.len() == 5 && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse::<u32>().ok())
            .flatten()
    };
    let (index, count) = (number(index)?, number(count)?);
    (1..=count).contains(&index).then_some(())?;
    (count <= MAX_SHARDS).then_some(Split {
        prefix,
        index,
        count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: [&str; 9] = [
        "README.md",
        "Model-IQ4_XS.gguf",
        "Model-Q8_0.gguf",
        "Model-Q4_K_M.gguf",
        "mmproj-Model-F16.gguf",
        "Model-Q4_K_S.gguf",
        "big/Model-F16-00002-of-00002.gguf",
        "big/Model-F16-00001-of-00002.gguf",
        "Model-Q4_0.gguf",
    ];

    #[test]
    fn the_default_is_q4_k_m_then_q8_0_then_the_first_model_file() {
        assert_eq!(choose(&REPO, None).unwrap(), ["Model-Q4_K_M.gguf"]);
        let without = [REPO[1], REPO[2], REPO[4]];
        assert_eq!(choose(&without, None).unwrap(), ["Model-Q8_0.gguf"]);
        let neither = [REPO[4], REPO[1]];
        assert_eq!(choose(&neither, None).unwrap(), ["Model-IQ4_XS.gguf"]);
    }

    #[test]
    fn a_tag_matches_case_insensitively_and_never_inside_a_longer_tag() {
        assert_eq!(
            choose(&REPO, Some("q4_k_s")).unwrap(),
            ["Model-Q4_K_S.gguf"]
        );
        assert_eq!(choose(&REPO, Some("Q4_0")).unwrap(), ["Model-Q4_0.gguf"]);
        let only_iq = ["Model-IQ4_0.gguf"];
        assert!(choose(&only_iq, Some("Q4_0")).is_err());
        // `Q4_K` is not `Q4_K_M`.
        let error = choose(&REPO, Some("Q4_K")).unwrap_err();
        assert!(
            error.contains("no GGUF file of quantisation Q4_K"),
            "{error}"
        );
        assert!(error.contains("Model-Q8_0.gguf"), "{error}");
        assert!(!error.contains("mmproj"), "{error}");
    }

    #[test]
    fn a_split_model_is_every_shard_in_order() {
        assert_eq!(
            choose(&REPO, Some("F16")).unwrap(),
            [
                "big/Model-F16-00001-of-00002.gguf",
                "big/Model-F16-00002-of-00002.gguf"
            ]
        );
        let missing = [
            "Model-F16-00001-of-00003.gguf",
            "Model-F16-00003-of-00003.gguf",
        ];
        let error = choose(&missing, Some("F16")).unwrap_err();
        assert!(error.contains("shard 2 is not listed"), "{error}");
        // A later shard alone is never the model.
        assert!(choose(&["Model-F16-00002-of-00002.gguf"], None).is_err());
    }

    #[test]
    fn impossible_shard_numbers_are_not_splits() {
        assert_eq!(split_of("m-00000-of-00002.gguf"), None);
        assert_eq!(split_of("m-00003-of-00002.gguf"), None);
        assert_eq!(split_of("m-1-of-2.gguf"), None);
        assert_eq!(
            split_of("a/m-Q8_0-00002-of-00004.gguf"),
            Some(Split {
                prefix: "a/m-Q8_0",
                index: 2,
                count: 4
            })
        );
    }
}
