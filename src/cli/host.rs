//! Host commands: `laminar tune`, `laminar iotune`, `laminar install-service`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use laminar_broker::config::BrokerConfig;
use laminar_tuning::iotune::{run_iotune, IoTuneOptions};
use laminar_tuning::systemd_units::{BROKER_UNIT, TUNE_UNIT};
use laminar_tuning::{apply, check_all, render_json, render_table, TuneOptions};

/// Compare kernel settings with what a broker wants; change them only with --apply.
///
/// Examples:
///   laminar tune
///   laminar tune --config /etc/laminar/server.properties --json
///   sudo laminar tune --apply
#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Write the recommended values (needs root); without it nothing changes.
    #[arg(long)]
    apply: bool,
    /// The broker config whose log.dirs are checked (default: /var/lib/laminar or --dir).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The data directory to check, instead of the config's log.dirs.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Measure the data disk and write an I/O profile, which sizes the broker's write-behind.
///
/// The broker reads `iotune.json` from its first log dir (or the file that
/// `laminar.iotune.profile` names) at start.
///
/// Examples:
///   laminar iotune --dir /var/lib/laminar --duration 30      # writes /var/lib/laminar/iotune.json
///   laminar iotune --dir /var/lib/laminar --out /etc/laminar/iotune.json
#[derive(Args, Debug)]
pub struct IotuneArgs {
    /// A directory on the disk to measure (scratch files are removed afterwards).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Seconds for the whole run.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Where to write the profile [default: <DIR>/iotune.json, where the broker looks when
    /// DIR is its first log dir].
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Print or write the systemd units (laminar.service, laminar-tune.service), and the laminar(8)
/// man page their Documentation= names.
///
/// Examples:
///   laminar install-service                 # print both units
///   sudo laminar install-service --write /etc/systemd/system && sudo systemctl daemon-reload
#[derive(Args, Debug)]
pub struct InstallServiceArgs {
    /// Write the units into this directory instead of printing them (and laminar.8 into
    /// --man-dir).
    #[arg(long, value_name = "DIR")]
    write: Option<PathBuf>,
    /// Where --write puts the laminar(8) man page (created if missing).
    #[arg(long, value_name = "DIR", default_value = "/usr/local/share/man/man8")]
    man_dir: PathBuf,
    /// The laminar binary the units run (default: /usr/local/bin/laminar).
    #[arg(long, value_name = "PATH")]
    binary: Option<PathBuf>,
}

pub fn tune(args: TuneArgs) -> anyhow::Result<()> {
    let data_dir = match (&args.dir, &args.config) {
        (Some(dir), _) => dir.clone(),
        (None, Some(path)) => {
            let loaded = BrokerConfig::load(path, &[]).map_err(anyhow::Error::new)?;
            loaded
                .config
                .log_dirs
                .first()
                .cloned()
                .context("log.dirs is empty")?
        }
        (None, None) => PathBuf::from("/var/lib/laminar"),
    };
    let options = TuneOptions::for_data_dir(existing_ancestor(&data_dir));
    let checks = check_all(&options);
    if args.json {
        println!("{}", render_json(&checks));
    } else {
        print!("{}", render_table(&checks));
    }
    let outcomes = apply(&options, &checks, args.apply);
    let mut failed = 0;
    for outcome in &outcomes {
        let target = format!("{} = {} ({})", outcome.path, outcome.value, outcome.check);
        match (&outcome.error, args.apply) {
            (Some(error), _) => {
                failed += 1;
                eprintln!("cannot write {target}: {error}");
            }
            (None, true) if outcome.written => eprintln!("wrote {target}"),
            (None, false) if !args.json => eprintln!("would write {target} (with --apply)"),
            _ => {}
        }
    }
    if args.apply && failed > 0 {
        bail!("{failed} setting(s) could not be written (run as root?)");
    }
    Ok(())
}

/// The nearest existing directory at or above `dir` (checks read its disk before it exists).
fn existing_ancestor(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|d| d.exists())
        .unwrap_or(Path::new("/"))
        .to_path_buf()
}

pub fn iotune(args: IotuneArgs) -> anyhow::Result<()> {
    if !args.dir.is_dir() {
        bail!("--dir {} is not a directory", args.dir.display());
    }
    let mut options = IoTuneOptions::for_data_dir(&args.dir);
    options.duration = Duration::from_secs(args.duration.max(1));
    let profile = run_iotune(&options).context("iotune failed")?;
    print!("{}", profile.render_table());
    let out = args.out.unwrap_or_else(|| args.dir.join("iotune.json"));
    profile
        .write_json(&out)
        .with_context(|| format!("cannot write {}", out.display()))?;
    println!("wrote {}", out.display());
    Ok(())
}

/// `man_pages` are laminar(8), which the broker unit's `Documentation=man:laminar(8)` names, and
/// its subcommands' pages, in roff: written with the units so that the link exists.
pub fn install_service(args: InstallServiceArgs, man_pages: &[(String, Vec<u8>)]) -> anyhow::Result<()> {
    let binary = args.binary.map(|b| b.display().to_string());
    let units = [
        ("laminar.service", BROKER_UNIT),
        ("laminar-tune.service", TUNE_UNIT),
    ]
    .map(|(name, unit)| {
        let text = match &binary {
            Some(path) => unit.replace("/usr/local/bin/laminar", path),
            None => unit.to_string(),
        };
        (name, text)
    });
    match args.write {
        None => {
            for (name, text) in &units {
                println!("# ---- {name}\n{text}");
            }
        }
        Some(dir) => {
            for (name, text) in &units {
                let path = dir.join(name);
                std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
                println!("wrote {}", path.display());
            }
            std::fs::create_dir_all(&args.man_dir)
                .with_context(|| format!("cannot create {}", args.man_dir.display()))?;
            for (name, page) in man_pages {
                let path = args.man_dir.join(name);
                std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
            }
            println!(
                "wrote {} man pages into {}",
                man_pages.len(),
                args.man_dir.display()
            );
            println!("next: systemctl daemon-reload && systemctl enable --now laminar-tune laminar");
        }
    }
    Ok(())
}
