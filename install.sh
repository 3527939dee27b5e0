#!/bin/sh
# Installs cronguard: dependencies, build, a launcher on PATH, the man page.
#
#   ./install.sh               install (again: it is idempotent)
#   ./install.sh --uninstall   remove what it installed, and the directories it created
#                              once they are empty; root's run log and locks stay
#   ./install.sh --uninstall --purge
#                              also remove root's run log (/var/lib/cronguard), lock
#                              directory and the group cronguard
#
# PREFIX defaults to /usr/local for root and ~/.local otherwise; DESTDIR stages the files
# under another root (for packaging) while the launcher still points at PREFIX.
set -eu

cd "$(dirname "$0")"
if [ "$(id -u)" = 0 ]; then PREFIX=${PREFIX:-/usr/local}; else PREFIX=${PREFIX:-$HOME/.local}; fi
DESTDIR=${DESTDIR:-}
libdir=$PREFIX/lib/cronguard
bindir=$PREFIX/bin
mandir=$PREFIX/share/man
# systemd-tmpfiles makes root's shared lock directory again at every boot (/run is a tmpfs).
case $PREFIX in
  /usr | /usr/local) tmpfiles=$PREFIX/lib/tmpfiles.d/cronguard.conf ;;
  *) tmpfiles=/etc/tmpfiles.d/cronguard.conf ;;
esac

# The directories install.sh created (PREFIX paths, one a line), so that --uninstall removes
# those and only those. It lives in libdir, which belongs to cronguard entirely.
created_list=$libdir/created-dirs

say() { printf 'install.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

if [ "${1:-}" = --uninstall ]; then
  case "$#:${2:-}" in
    1:) purge=false ;;
    2:--purge) purge=true ;;
    *) shift; die "unknown arguments: $* (--uninstall takes only --purge)" ;;
  esac
  removed=0
  gone() {
    say "removed $1"
    removed=$((removed + 1))
  }
  created=
  [ -f "$DESTDIR$created_list" ] && created=$(cat "$DESTDIR$created_list")
  for file in "$DESTDIR$bindir/cronguard" "$DESTDIR$bindir/cronguard.new" "$DESTDIR$tmpfiles"; do
    if [ -e "$file" ] || [ -L "$file" ]; then
      rm -f "$file"
      gone "$file"
    fi
  done
  # The man pages, in one line: cronguard(1), one per subcommand, cronguard.conf(5).
  pages=0
  for file in "$DESTDIR$mandir"/man1/cronguard.1 "$DESTDIR$mandir"/man1/cronguard-*.1 "$DESTDIR$mandir/man5/cronguard.conf.5"; do
    if [ -e "$file" ] || [ -L "$file" ]; then
      rm -f "$file"
      pages=$((pages + 1))
    fi
  done
  [ "$pages" = 0 ] || gone "$pages man pages from $DESTDIR$mandir"
  # libdir.new is what an interrupted install leaves.
  for dir in "$DESTDIR$libdir" "$DESTDIR$libdir.new"; do
    if [ -e "$dir" ] || [ -L "$dir" ]; then
      rm -rf "$dir"
      gone "$dir"
    fi
  done
  # Deepest first (a reverse sort puts a directory after everything below it), and only
  # while empty: rmdir never removes a directory that holds anything else.
  while IFS= read -r dir; do
    [ -n "$dir" ] && [ -d "$DESTDIR$dir" ] && [ ! -L "$DESTDIR$dir" ] || continue
    if rmdir "$DESTDIR$dir" 2>/dev/null; then gone "$DESTDIR$dir"; fi
  done <<DIRS
$(printf '%s\n' "$created" | LC_ALL=C sort -r)
DIRS
  [ "$removed" -gt 0 ] || say "nothing to remove in ${DESTDIR}${PREFIX}"
  if [ -z "$DESTDIR" ] && getent group cronguard >/dev/null; then
    if [ "$purge" = true ]; then
      for dir in /var/lib/cronguard /run/lock/cronguard; do
        if [ -e "$dir" ] || [ -L "$dir" ]; then rm -rf "$dir" && say "removed $dir"; fi
      done
      groupdel cronguard && say "removed the group cronguard"
    else
      say "kept the group cronguard, /run/lock/cronguard and /var/lib/cronguard (run logs): ./install.sh --uninstall --purge removes them"
    fi
  fi
  exit 0
fi
[ $# -eq 0 ] || die "unknown argument: $1 (use --uninstall or nothing)"

# mkdir -p that notes in $created each level it had to create (as a PREFIX path).
created=
make_dir() {
  missing=
  dir=$1
  while [ ! -d "$DESTDIR$dir" ] && [ "$dir" != / ] && [ "$dir" != . ]; do
    missing="$dir
$missing"
    dir=$(dirname "$dir")
  done
  mkdir -p "$DESTDIR$1"
  created="$created$missing"
}

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
make_dir "$(dirname "$libdir")"
make_dir "$bindir"
make_dir "$mandir/man1"
make_dir "$mandir/man5"
mkdir -p "$stage/node_modules"
# As root, a real install is a system install too (below); the tmpfiles.d directory it may
# make is noted with the rest, so that --uninstall removes it once empty.
system=false
if [ "$(id -u)" = 0 ] && [ -z "$DESTDIR" ]; then
  system=true
  make_dir "$(dirname "$tmpfiles")"
fi
# An earlier install's list carries over: it created what now already exists.
{
  [ -f "$DESTDIR$created_list" ] && cat "$DESTDIR$created_list"
  printf '%s' "$created"
} | sort -u > "$stage/${created_list##*/}"
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
# The V8 code cache is tied to each file as installed (size and time) and to this node.
"$node" --input-type=module -e "import('./scripts/train.mjs').then((b) => b.trainCodeCache(process.argv[1], process.argv[2]))" \
  "$DESTDIR$libdir/dist" "$node" || say "note: no code cache (cronguard works, starting a little slower)"

launcher=$DESTDIR$bindir/cronguard
# The development launcher's hand-over of NODE_EXTRA_CA_CERTS (see bin/cronguard), taken
# as it is, so that the two launchers cannot drift apart.
defer=$(sed -n '/^if \[ -n "${NODE_EXTRA_CA_CERTS-}" \]; then$/,/^fi$/p' bin/cronguard)
[ -n "$defer" ] || die "bin/cronguard has no NODE_EXTRA_CA_CERTS hand-over to copy"
cat > "$launcher.new" <<LAUNCHER
#!/bin/sh
$defer
exec '$node' -- '$libdir/dist/cronguard.cjs' "\$@"
LAUNCHER
chmod 755 "$launcher.new"
mv "$launcher.new" "$launcher"
# cronguard(1), a page per subcommand (cronguard-serve(1)...) and cronguard.conf(5).
for page in man/*.1 man/*.5; do
  section=${page##*.}
  cp "$page" "$DESTDIR$mandir/man$section/${page##*/}"
  chmod 644 "$DESTDIR$mandir/man$section/${page##*/}"
done

# The group whose members share root's locks and run log (docs/locks.md, "Who shares a lock"), and
# root's directories made for it now: setgid, so that what anyone makes there belongs to
# the group; sticky, so that a member can rename or remove only its own files. Only for a
# real install as root: a staged one (DESTDIR) leaves the system to its package.
if [ "$system" = true ]; then
  say "as root, also for the whole system: the group cronguard, root's /run/lock/cronguard and /var/lib/cronguard shared with it, and $tmpfiles (--uninstall removes the rule, --uninstall --purge the rest)"
  if ! getent group cronguard >/dev/null; then
    groupadd --system cronguard || die "could not create the group cronguard"
    say "created the group cronguard: its members share root's locks and run log (usermod -aG cronguard USER)"
  fi
  for dir in /run/lock/cronguard /var/lib/cronguard; do
    [ -L "$dir" ] && die "$dir is a symbolic link; remove it and run install.sh again"
    mkdir -p "$dir"
    owner=$(stat -c %u "$dir")
    [ "$owner" = 0 ] || die "$dir belongs to uid $owner, not root: someone else made it; remove it and run install.sh again"
    chown root:cronguard "$dir"
    chmod 3770 "$dir"
  done
  printf '%s\n' '# cronguard: root'"'"'s lock directory, shared with the group cronguard (see man cronguard)' \
    'd /run/lock/cronguard 3770 root cronguard -' > "$tmpfiles"
fi

say "installed $launcher (node: $node)"
case ":$PATH:" in
  *":$bindir:"*) ;;
  *) say "note: $bindir is not on your PATH; add it, or call $bindir/cronguard" ;;
esac
