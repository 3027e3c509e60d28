#!/usr/bin/env bash
# Mutation testing of one module of the core, the log, the writer, the record format, the wire
# codecs or the transport (docs/testing.md, "Mutation testing"): cargo-mutants in place, in the worktree this is
# started from, on the module's files with the module's test targets. Not part of CI.
# Usage: tools/mutants.sh MODULE|FILE.rs [cargo-mutants options...]
#   MODULE: raft, record, log, writer, wire or transport; FILE.rs: one file of those (its
#   module's tests)
#   e.g. git worktree add ../mut HEAD && cd ../mut && tools/mutants.sh writer --shard 0/2 -o ../mutout/w0
#        tools/mutants.sh engine/src/raft/vote.rs --list
# Mutants are written into the tree while it runs: use a worktree of its own, clean, that
# nothing else builds (a warm target/ there makes each mutant a rebuild of one crate).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"

if [ $# -lt 1 ]; then
    sed -n '2,11p' "$0" >&2
    exit 2
fi
what=$1
shift

log_tests=(log_basic log_index log_reader log_recovery log_retention log_space log_timestamps)
# module: package, files (globs), test targets (--lib is always run)
module_of() {
    case $1 in
        engine/src/raft/*) echo raft ;;
        engine/src/replica/*) echo replica ;;
        engine/src/record/*) echo record ;;
        engine/src/log/* | engine/src/io/reader.rs) echo log ;;
        engine/src/io/*) echo writer ;;
        net/src/wire/*) echo wire ;;
        net/src/transport/*) echo transport ;;
        *) echo "" ;;
    esac
}
module=$what
files=()
if [[ $what == *.rs ]]; then
    module=$(module_of "$what")
    if [ -z "$module" ] || [ ! -f "$what" ]; then
        echo "mutants.sh: $what is not a file of the modules in scope (docs/testing.md)" >&2
        exit 2
    fi
    files=("$what")
fi
case $module in
    raft)
        package=ringraft-engine
        [ ${#files[@]} -gt 0 ] || files=("engine/src/raft/*.rs")
        # The unit tests alone: a caught mutant is one a named test fails on (the simulator's
        # seeds would catch more, at about 20 s a mutant).
        tests=()
        ;;
    replica)
        package=ringraft-engine
        [ ${#files[@]} -gt 0 ] || files=("engine/src/replica/*.rs")
        # Its unit tests over a real core; the simulator's whole-replica seeds catch more, at
        # far more time a mutant.
        tests=()
        ;;
    record)
        package=ringraft-engine
        [ ${#files[@]} -gt 0 ] || files=("engine/src/record/*.rs")
        tests=(record_basic record_props record_oracle)
        ;;
    log)
        package=ringraft-engine
        [ ${#files[@]} -gt 0 ] || files=("engine/src/log/*.rs" engine/src/io/reader.rs)
        tests=("${log_tests[@]}")
        ;;
    writer)
        package=ringraft-engine
        [ ${#files[@]} -gt 0 ] || files=(engine/src/io/writer.rs engine/src/io/events.rs engine/src/io/group_plan.rs)
        # The writer's full-disk, retention, read and lookup paths are tested with the log's.
        tests=(io_writer "${log_tests[@]}")
        ;;
    wire)
        package=ringraft-net
        [ ${#files[@]} -gt 0 ] || files=("net/src/wire/*.rs" "net/src/wire/**/*.rs")
        tests=(wire_oracle wire_client_oracle wire_metadata_oracle wire_sasl_oracle)
        ;;
    transport)
        package=ringraft-net
        [ ${#files[@]} -gt 0 ] || files=("net/src/transport/*.rs" "net/src/transport/**/*.rs")
        tests=(transport_echo transport_tls transport_timers transport_abuse transport_teardown transport_setup)
        ;;
    *)
        echo "mutants.sh: unknown module $module (raft, replica, record, log, writer, wire, transport)" >&2
        exit 2
        ;;
esac

listing=0
for arg in "$@"; do
    if [ "$arg" = --list ]; then listing=1; fi
done
if [ "$listing" = 0 ] && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "mutants.sh: the tree has changes; run it in a clean worktree of its own" >&2
    exit 2
fi

args=(--package "$package")
for f in "${files[@]}"; do args+=(--file "$f"); done
args+=(--cargo-arg=--lib)
for t in "${tests[@]}"; do args+=(--cargo-arg=--test "--cargo-arg=$t"); done
# Timeouts: a build of the one crate takes seconds (the `mutants` profile, .cargo/mutants.toml);
# two minutes of tests is four times the slowest module's baseline here (the writer's, about
# 32 s at a load of 3), so only a hang reaches it.
set -x
exec nice -n 19 cargo mutants --in-place --build-timeout 300 --timeout 120 "${args[@]}" "$@"
