#!/bin/sh
# Refresh the chart library the dashboard serves (uPlot, MIT) from the npm
# registry: the pinned version's tarball, checked against its known sha512,
# unpacked into the package's static folder with its licence. Run from the
# repository root; the result is byte-for-byte the same on every run.
set -eu

VERSION=1.6.32
# `npm view uplot@$VERSION dist.integrity`
INTEGRITY=sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw==
DEST=src/webtier/web/dashboard/static/vendor/uplot

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tarball=$(cd "$work" && npm pack --silent "uplot@$VERSION")
actual="sha512-$(openssl dgst -sha512 -binary "$work/$tarball" | base64 -w0)"
if [ "$actual" != "$INTEGRITY" ]; then
    echo "error: uplot-$VERSION.tgz has $actual, expected $INTEGRITY" >&2
    exit 1
fi
tar -xzf "$work/$tarball" -C "$work"

mkdir -p "$DEST"
cp "$work/package/dist/uPlot.iife.min.js" "$DEST/uPlot.iife.min.js"
cp "$work/package/dist/uPlot.min.css" "$DEST/uPlot.min.css"
cp "$work/package/LICENSE" "$DEST/LICENSE"
printf 'uPlot %s from the npm registry (%s), by scripts/vendor_charts.sh\n' \
    "$VERSION" "$INTEGRITY" > "$DEST/VERSION"
echo "uPlot $VERSION vendored into $DEST"
