//! `choreoc`: the command-line front end of the Choreo translator.

fn main() {
    eprintln!("choreoc: no subcommands yet");
    std::process::exit(2);
}
