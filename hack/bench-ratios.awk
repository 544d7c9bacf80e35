# Reads `go test -bench` output and prints, per benchmark, each variant's
# figures as ratios to the reference variant of the same run: "client-go"
# where there is one, else "protobuf" (the codec benchmarks). Benchmarks are
# named Benchmark<Group>/<variant>; ratios < 1 mean boltinformer is smaller
# or faster.
function trim(name) { sub(/-[0-9]+$/, "", name); return name }
/^Benchmark/ {
	name = trim($1)
	n = split(name, parts, "/")
	variant = parts[n]
	group = parts[1]
	for (i = 2; i < n; i++) group = group "/" parts[i]
	if (!(group in seen)) { order[++groups] = group; seen[group] = 1 }
	variants[group] = variants[group] " " variant
	for (i = 3; i < NF; i += 2) {
		unit = $(i + 1)
		val[group, variant, unit] = $i
		if (!((group, unit) in hasUnit)) { units[group] = units[group] " " unit; hasUnit[group, unit] = 1 }
	}
}
{ print }
END {
	print ""
	printf "%-40s %-24s %-12s %14s %14s %8s\n", "benchmark", "variant", "unit", "value", "reference", "ratio"
	for (g = 1; g <= groups; g++) {
		group = order[g]
		ref = ""
		if (index(variants[group], " client-go")) ref = "client-go"
		else if (index(variants[group], " protobuf")) ref = "protobuf"
		if (ref == "") continue
		nv = split(variants[group], vs, " ")
		nu = split(units[group], us, " ")
		for (v = 1; v <= nv; v++) {
			if (vs[v] == ref || vs[v] in done) continue
			for (u = 1; u <= nu; u++) {
				unit = us[u]
				if (unit == "allocs/op" || !((group, vs[v], unit) in val) || !((group, ref, unit) in val)) continue
				r = val[group, ref, unit]
				printf "%-40s %-24s %-12s %14s %14s %8s\n", group, vs[v], unit, val[group, vs[v], unit], r, (r > 0 ? sprintf("%.2fx", val[group, vs[v], unit] / r) : "-")
			}
		}
	}
}
