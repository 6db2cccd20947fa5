#!/usr/bin/env bash
# generated/<model>/ must be exactly what `dimoc compile` writes today for models/<model>.model:
# a change of the compiler or of a model without `make generated` fails here, so that every
# change of the generated code shows up as a reviewed diff.
source "$(dirname "$0")/../lib.sh"

for f in models/*.model; do
    name=$(basename "$f" .model)
    if ! "$DIMOC" compile "$f" -o "$T/$name" >"$T/$name.out" 2>&1; then
        fail "fresh-$name" "dimoc compile failed: $(head -3 "$T/$name.out" | tr '\n' ' ')"
        continue
    fi
    if [ ! -d "generated/$name" ]; then
        fail "fresh-$name" "generated/$name is missing (run make generated)"
        continue
    fi
    if d=$(diff -r "generated/$name" "$T/$name" 2>&1); then
        pass "fresh-$name"
    else
        fail "fresh-$name" "generated/$name is stale (run make generated): $(echo "$d" | head -4 | tr '\n' ' ')"
    fi
done

# every generated folder still has its model
orphans=""
for d in generated/*/; do
    [ -d "$d" ] || continue
    name=$(basename "$d")
    [ -f "models/$name.model" ] || orphans="$orphans $name"
done
if [ -z "$orphans" ]; then pass "no-orphan-generated"; else fail "no-orphan-generated" "no model for:$orphans"; fi
