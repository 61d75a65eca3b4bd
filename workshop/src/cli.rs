//! The command line: `workshop list` and `workshop <lab> [shared flags] [lab flags]`.
//!
//! The subcommands come from the registry ([`crate::labs::LABS`]): each lab's own flags are a clap
//! derive struct, and the flags every lab shares ([`CommonArgs`]) are added to each of them here.

use std::ffi::OsString;

use clap::{ArgMatches, Args, FromArgMatches};

use crate::bench::BenchArgs;
use crate::lab::args::CommonArgs;
use crate::lab::report::{wrap, Gate, Narrator};
use crate::lab::stop::Stop;
use crate::lab::{LabContext, LabEntry, Target};
use crate::labs::LABS;
use crate::playground::PlaygroundArgs;
use crate::view::terminal::{Stream, Terminal, TerminalOptions};

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    List,
    Bench(BenchArgs),
    Playground(PlaygroundArgs),
    Lab {
        entry: &'static LabEntry,
        common: CommonArgs,
        matches: ArgMatches,
    },
}

/// The columns help and the list fit in: a room's screen (clap wraps help at it).
pub const WIDTH: usize = 100;

/// `workshop list`: each lab's name and summary, the summary continued under itself when it
/// does not fit in [`WIDTH`].
pub fn list_lines(labs: &[(&str, &str)]) -> Vec<String> {
    let name_width = labs.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let under = " ".repeat(name_width + 2);
    labs.iter()
        .flat_map(|(name, summary)| {
            let first = format!("{name:name_width$}  ");
            wrap(summary, &first, &under, WIDTH)
        })
        .collect()
}

/// The whole command, as `--help` shows it.
pub fn command() -> clap::Command {
    // The summary goes on last: a derive's doc comment, added with its flags, would replace it.
    let labs = LABS
        .iter()
        .map(|entry| CommonArgs::augment_args(entry.command()).about(entry.summary));
    clap::Command::new("workshop")
        .max_term_width(WIDTH)
        .version(env!("CARGO_PKG_VERSION"))
        .about("Labs that reproduce what partitioning breaks: run one, predict, watch, read the verdict")
        .after_help(
            "Exit code: 0 when the lab showed what it exists to show, 1 when it did not, 2 on an error.",
        )
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(clap::Command::new("list").about("List the labs, one line each"))
        .subcommand(
            BenchArgs::augment_args(clap::Command::new("bench")).about(
                "Measure the broker and client against this machine's raw loopback ceilings",
            ),
        )
        .subcommand(
            PlaygroundArgs::augment_args(clap::Command::new("playground"))
                .about("Source 000's hot-key exercise and a free mode, live in a browser, on a real broker"),
        )
        .subcommands(labs)
}

/// Parses `args` (without the program name).
pub fn parse<I, T>(args: I) -> Result<Invocation, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv = std::iter::once(OsString::from("workshop")).chain(args.into_iter().map(Into::into));
    let matches = command().try_get_matches_from(argv)?;
    let (name, sub) = matches
        .subcommand()
        .expect("clap enforces subcommand_required");
    if name == "list" {
        return Ok(Invocation::List);
    }
    if name == "bench" {
        return Ok(Invocation::Bench(BenchArgs::from_arg_matches(sub)?));
    }
    if name == "playground" {
        return Ok(Invocation::Playground(PlaygroundArgs::from_arg_matches(
            sub,
        )?));
    }
    let entry = LABS
        .iter()
        .find(|entry| entry.name == name)
        .expect("every subcommand but list comes from the registry");
    let common = CommonArgs::from_arg_matches(sub)?;
    Ok(Invocation::Lab {
        entry,
        common,
        matches: sub.clone(),
    })
}

/// The context the shared flags ask for: the terminal view on stdout (on stderr under
/// `--json`, whose document is then all that stdout carries), none under `--check`; under
/// `--step` the narrator waits at a gate that stdin releases.
pub fn context(common: &CommonArgs) -> LabContext {
    let mut narrator = Narrator::new();
    if !common.check {
        let stream = if common.json {
            Stream::Stderr
        } else {
            Stream::Stdout
        };
        let width = common.width.map(usize::from);
        let options = TerminalOptions::for_stream(stream, width, common.all_partitions);
        narrator.subscribe(Box::new(Terminal::on(stream, options)));
        // The room view's Reveal / Next buttons release this gate too.
        if common.step || common.web.is_some() {
            narrator.pace(Gate::stdin());
        }
    }
    LabContext {
        seed: common.seed,
        target: match &common.bootstrap {
            Some(addr) => Target::Bootstrap(addr.clone()),
            None => Target::Embedded,
        },
        narrator,
        stop: Stop::never(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::args::one_line;

    #[test]
    fn the_command_is_well_formed() {
        command().debug_assert();
    }

    /// `workshop --help`, every subcommand's help (short and long) and `workshop list` fit in
    /// 100 columns, as clap wraps them (`tests/cli.rs` checks a wider terminal).
    #[test]
    fn every_help_and_list_line_fits_in_100_columns() {
        fn check(cmd: &mut clap::Command, path: &str, wide: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            for help in [cmd.render_help(), cmd.render_long_help()] {
                for line in help.to_string().lines() {
                    let width = line.chars().count();
                    if width > WIDTH {
                        wide.push(format!("{path}: {width} columns: {line}"));
                    }
                }
            }
            for sub in cmd.get_subcommands_mut() {
                check(sub, &path, wide);
            }
        }
        let mut cli = command();
        cli.build();
        let mut wide = Vec::new();
        check(&mut cli, "", &mut wide);
        let labs: Vec<(&str, &str)> = LABS.iter().map(|l| (l.name, l.summary)).collect();
        for line in list_lines(&labs) {
            if line.chars().count() > WIDTH {
                wide.push(format!("list: {line}"));
            }
        }
        assert!(wide.is_empty(), "{}", wide.join("\n"));
    }

    #[test]
    fn a_long_summary_continues_under_itself_in_the_list() {
        let long = "word ".repeat(30);
        let lines = list_lines(&[("a", "short"), ("longer", long.trim_end())]);
        assert_eq!(lines[0], "a       short");
        assert!(lines[1].starts_with("longer  word word"), "{lines:?}");
        assert!(lines[2].starts_with("        word"), "{lines:?}");
        assert!(
            lines.iter().all(|l| l.chars().count() <= WIDTH),
            "{lines:?}"
        );
    }

    #[test]
    fn each_lab_is_described_by_its_summary() {
        let command = command();
        for entry in LABS {
            let sub = command.find_subcommand(entry.name).unwrap();
            assert_eq!(
                sub.get_about().map(|a| a.to_string()),
                Some(entry.summary.to_string())
            );
        }
    }

    #[test]
    fn a_width_is_a_number_of_columns_a_screen_can_have() {
        let Invocation::Lab { common, .. } = parse(["rehash", "--width", "120"]).unwrap() else {
            panic!("rehash did not parse as a lab");
        };
        assert_eq!(common.width, Some(120));
        assert!(parse(["rehash", "--width", "10"]).is_err());
        assert!(parse(["rehash", "--width", "wide"]).is_err());
    }

    #[test]
    fn errors_fit_on_one_line() {
        let err = parse(["rehash", "--keys", "many"]).unwrap_err();
        let line = one_line(&err);
        assert!(!line.contains('\n'), "{line}");
        assert!(line.contains("--keys"), "{line}");
    }

    #[test]
    fn a_misspelt_lab_or_flag_gets_clap_s_suggestion_on_the_same_line() {
        let line = one_line(&parse(["partitons"]).unwrap_err());
        assert!(!line.contains('\n'), "{line}");
        assert!(line.contains("'partitons'"), "{line}");
        assert!(
            line.contains("similar subcommand exists: 'partitions'"),
            "{line}"
        );
        let line = one_line(&parse(["rehash", "--sed", "3"]).unwrap_err());
        assert!(line.contains("'--seed'"), "{line}");
    }

    #[test]
    fn shared_flags_reach_every_lab() {
        for entry in LABS {
            let parsed = parse([entry.name, "--seed", "7", "--json", "--check"]).unwrap();
            let Invocation::Lab { common, .. } = parsed else {
                panic!("{} did not parse as a lab", entry.name);
            };
            assert_eq!(common.seed, 7);
            assert!(common.json && common.check && !common.step);
            assert_eq!(common.width, None);
        }
    }
}
