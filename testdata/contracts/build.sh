#!/bin/sh
# build.sh compiles the test contracts with a pinned solc from npm and writes
# the ABI and bytecode next to the sources and into facilitator/evm/contracts
# (which Go embeds; go:embed cannot reach testdata/ from there).
# Usage: testdata/contracts/build.sh   (needs node and npm; tests never do)
set -eu
SOLC_VERSION=0.8.37
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

npm install --silent --no-audit --no-fund --prefix "$work" "solc@$SOLC_VERSION" >/dev/null
mkdir -p "$work/out"
cd "$here"
for c in TestUSDC TestWallet1271; do
	"$work/node_modules/.bin/solcjs" --bin --abi --optimize --optimize-runs 200 \
		--base-path "$here" -o "$work/out" "$c.sol"
	cp "$work/out/${c}_sol_${c}.abi" "$here/$c.abi"
	cp "$work/out/${c}_sol_${c}.bin" "$here/$c.bin"
	cp "$here/$c.abi" "$here/$c.bin" "$root/facilitator/evm/contracts/"
done
echo "built with solc $SOLC_VERSION: $(ls "$here"/*.bin | xargs -n1 basename | tr '\n' ' ')"
