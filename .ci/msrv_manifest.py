"""Writes the library-only manifest the MSRV check builds: Cargo.toml without the sections
an older cargo cannot resolve or does not need (dev-dependencies, benches, examples, the loom
target dependency, which only `--cfg loom` builds use, and the workspace of the bench crate)."""
import sys

DROP = ("[dev-dependencies]", "[target.'cfg(loom)'.dependencies]", "[[bench]]", "[[example]]",
        "[workspace]")
out, keep = [], True
for line in open(sys.argv[1]):
    if line.startswith("["):
        keep = line.strip() not in DROP
    if keep:
        out.append(line)
open(sys.argv[2], "w").write("".join(out))
