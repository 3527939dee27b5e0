#!/bin/sh
# Installs cronguard: dependencies, build, a launcher on PATH, the man page.
#
#   ./install.sh               install (again: it is idempotent)
#   ./install.sh --uninstall   remove what it installed
#
# PREFIX defaults to /usr/local for root and ~/.local otherwise; DESTDIR stages the files
# under another root (for packaging) while the launcher still points at PREFIX.
set -eu

cd "$(dirname "$0")"
if [ "$(id -u)" = 0 ]; then PREFIX=${PREFIX:-/usr/local}; else PREFIX=${PREFIX:-$HOME/.local}; fi
DESTDIR=${DESTDIR:-}
libdir=$PREFIX/lib/cronguard
bindir=$PREFIX/bin
mandir=$PREFIX/share/man/man1

say() { printf 'install.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

if [ "${1:-}" = --uninstall ]; then
  rm -rf "$DESTDIR$libdir" "$DESTDIR$bindir/cronguard" "$DESTDIR$mandir/cronguard.1"
  say "removed cronguard from $DESTDIR$PREFIX"
  exit 0
fi
[ $# -eq 0 ] || die "unknown argument: $1 (use --uninstall or nothing)"

# cron runs jobs with PATH=/usr/bin:/bin, so the launcher calls node by absolute path.
node=$(command -v node) || die "node not found on PATH; install Node.js 20 or newer"
major=$("$node" -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || die "Node.js $major is too old; cronguard needs 20 or newer"

if ! npm ls --all >/dev/null 2>&1; then
  say "installing dependencies"
  npm ci --no-audit --no-fund
fi
npm run build --silent

say "installing into $DESTDIR$PREFIX"
stage=$DESTDIR$libdir.new
rm -rf "$stage"
mkdir -p "$stage/node_modules" "$DESTDIR$bindir" "$DESTDIR$mandir"
cp -R dist package.json "$stage/"
# Runtime needs only the production dependencies (native addons load from node_modules);
# each top-level package is copied with whatever it nests.
npm ls --omit=dev --all --parseable 2>/dev/null | while read -r dir; do
  rel=${dir#"$PWD"/}
  case "$rel" in
    node_modules/@*/*/node_modules/* | node_modules/[!@]*/node_modules/*) ;;
    node_modules/@*/*) mkdir -p "$stage/$(dirname "$rel")" && cp -R "$dir" "$stage/$rel" ;;
    node_modules/*) cp -R "$dir" "$stage/$rel" ;;
  esac
done
# Native addons keep their sources and object files next to the binary they built.
rm -rf "$stage"/node_modules/*/build/Release/obj* "$stage"/node_modules/*/build/Release/.deps \
  "$stage/node_modules/better-sqlite3/deps" "$stage/node_modules/better-sqlite3/src"
rm -rf "$DESTDIR$libdir"
mv "$stage" "$DESTDIR$libdir"

launcher=$DESTDIR$bindir/cronguard
cat > "$launcher.new" <<LAUNCHER
#!/bin/sh
exec '$node' '$libdir/dist/cronguard.cjs' "\$@"
LAUNCHER
chmod 755 "$launcher.new"
mv "$launcher.new" "$launcher"
cp man/cronguard.1 "$DESTDIR$mandir/cronguard.1"
chmod 644 "$DESTDIR$mandir/cronguard.1"

say "installed $launcher (node: $node)"
case ":$PATH:" in
  *":$bindir:"*) ;;
  *) say "note: $bindir is not on your PATH; add it, or call $bindir/cronguard" ;;
esac
