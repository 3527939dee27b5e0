#!/bin/sh
# Builds dist/cronguard_<version>_<arch>.deb from the built dist/ (npm run package:deb
# builds first) with dpkg-deb alone: the bundle and the two native addons as compiled here
# under /usr/lib/cronguard (the bundle loads them by path and needs nothing else from
# node_modules), the launcher, the man page, a commented /etc/cronguard.conf, tmpfiles.d
# for root's lock directory and a systemd unit for `serve`, not enabled. The maintainer
# scripts are in packaging/deb/.
set -eu
cd "$(dirname "$0")/.."
[ -f dist/cronguard.cjs ] || { echo "package-deb: no dist/; run npm run build first" >&2; exit 1; }
version=$(node -p 'require("./package.json").version')
arch=$(dpkg --print-architecture)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
umask 022

lib=$root/usr/lib/cronguard
mkdir -p "$lib/scripts" "$root/usr/bin" "$root/usr/share/man/man1" "$root/usr/share/man/man5" "$root/usr/share/doc/cronguard" \
  "$root/etc" "$root/usr/lib/tmpfiles.d" "$root/usr/lib/systemd/system" "$root/DEBIAN"
cp -R dist "$lib/dist"
rm -rf "$lib/dist/cache" "$lib/dist/node" "$lib/dist"/*.deb
cp scripts/train.mjs scripts/train-postgres.mjs scripts/train-mysql.mjs "$lib/scripts/"
cp package.json "$lib/"
for addon in better-sqlite3/build/Release/better_sqlite3.node fs-ext/build/Release/fs_ext.node; do
  pkg=${addon%%/*}
  mkdir -p "$lib/node_modules/${addon%/*}"
  strip --strip-unneeded -o "$lib/node_modules/$addon" "node_modules/$addon"
  chmod 644 "$lib/node_modules/$addon"
  cp "node_modules/$pkg/package.json" "$lib/node_modules/$pkg/"
done

# The launcher: Debian's node by its path (cron's PATH is /usr/bin:/bin anyway), and the
# development launcher's hand-over of NODE_EXTRA_CA_CERTS, taken as it is.
defer=$(sed -n '/^if \[ -n "${NODE_EXTRA_CA_CERTS-}" \]; then$/,/^fi$/p' bin/cronguard)
[ -n "$defer" ] || { echo "package-deb: bin/cronguard has no NODE_EXTRA_CA_CERTS hand-over" >&2; exit 1; }
printf '#!/bin/sh\n%s\nexec /usr/bin/node -- /usr/lib/cronguard/dist/cronguard.cjs "$@"\n' "$defer" > "$root/usr/bin/cronguard"
chmod 755 "$root/usr/bin/cronguard"

# cronguard(1), a page per subcommand (cronguard-serve(1)...) and cronguard.conf(5).
for page in man/*.1 man/*.5; do gzip -9n < "$page" > "$root/usr/share/man/man${page##*.}/${page##*/}.gz"; done
cp packaging/deb/copyright "$root/usr/share/doc/cronguard/copyright"
# README's links go to docs/, so the two go together.
cp README.md "$root/usr/share/doc/cronguard/"
cp -R docs "$root/usr/share/doc/cronguard/"
date=$(date -R -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")
printf 'cronguard (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- cronguard maintainers <cronguard@example.org>  %s\n' \
  "$version" "$version" "$date" | gzip -9n > "$root/usr/share/doc/cronguard/changelog.gz"
cp packaging/deb/cronguard.conf "$root/etc/cronguard.conf"
cp packaging/deb/tmpfiles.conf "$root/usr/lib/tmpfiles.d/cronguard.conf"
cp packaging/deb/cronguard-serve.service "$root/usr/lib/systemd/system/"

cp packaging/deb/conffiles "$root/DEBIAN/"
for script in postinst prerm postrm; do install -m 755 "packaging/deb/$script" "$root/DEBIAN/$script"; done
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
# The native addons load only in the Node.js major they were built for (the node that built
# node_modules): a nodejs of another major would install cleanly and fail every run (69).
major=$(node -p 'process.versions.node.split(".")[0]')
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
  -e "s/@NODE_MAJOR@/$major/" -e "s/@NODE_NEXT@/$((major + 1))/" packaging/deb/control > "$root/DEBIAN/control"
(cd "$root" && find usr etc -type f ! -path etc/cronguard.conf -print0 | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"

out=dist/cronguard_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
echo "$out ($(du -k "$out" | cut -f1) kB, installed $size kB)"
