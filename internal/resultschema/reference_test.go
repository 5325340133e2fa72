package resultschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// ReferencePath is the key reference, from the repository root.
const referencePath = "docs/results-json.md"

// reference renders the schema as Markdown: each output's keys, then each
// object's, with their types and descriptions.
func reference(schema []byte) ([]byte, error) {
	var s struct {
		Description string                    `json:"description"`
		Defs        map[string]map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# JSON results: every key\n\n")
	fmt.Fprintf(&b, "Generated from the schema [schema/tracekit-result.v1.json](schema/tracekit-result.v1.json) (JSON Schema\n"+
		"draft 2020-12), which is the source: validate a result against its `$defs` entry named below.\n%s\n\n", s.Description)
	fmt.Fprintf(&b, "Objects are closed (no key beyond those listed) unless a table says otherwise; a key marked\n"+
		"optional may be absent (the figure does not apply to the run); `null` means not measured.\n\n")
	var objects []string
	for k := range s.Defs {
		if !isOutput(k) {
			objects = append(objects, k)
		}
	}
	sort.Strings(objects)
	fmt.Fprintf(&b, "## Outputs\n\n")
	for _, o := range Outputs {
		writeDef(&b, o, s.Defs[o], 3)
	}
	fmt.Fprintf(&b, "## Objects\n\n")
	for _, o := range objects {
		writeDef(&b, o, s.Defs[o], 3)
	}
	return b.Bytes(), nil
}

func isOutput(name string) bool {
	for _, o := range Outputs {
		if o == name {
			return true
		}
	}
	return false
}

// writeDef writes one definition's heading, description and key table.
func writeDef(b *bytes.Buffer, name string, d map[string]any, level int) {
	fmt.Fprintf(b, "%s %s\n\n", strings.Repeat("#", level), name)
	if desc, _ := d["description"].(string); desc != "" {
		fmt.Fprintf(b, "%s\n\n", desc)
	}
	if ref, ok := d["$ref"].(string); ok {
		fmt.Fprintf(b, "An object [%s](#%s).\n\n", refName(ref), anchor(refName(ref)))
		return
	}
	props, _ := d["properties"].(map[string]any)
	req := map[string]bool{}
	if r, ok := d["required"].([]any); ok {
		for _, k := range r {
			req[k.(string)] = true
		}
	}
	var keys []string
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		fmt.Fprintf(b, "| key | type | description |\n|---|---|---|\n")
		for _, k := range keys {
			p := props[k].(map[string]any)
			opt := ""
			if !req[k] {
				opt = ", optional"
			}
			desc, _ := p["description"].(string)
			fmt.Fprintf(b, "| `%s` | %s%s | %s |\n", k, typeText(p), opt, cell(desc))
		}
		fmt.Fprintln(b)
	}
	if pp, ok := d["patternProperties"].(map[string]any); ok {
		var pats []string
		for k := range pp {
			pats = append(pats, k)
		}
		sort.Strings(pats)
		for _, k := range pats {
			p := pp[k].(map[string]any)
			desc, _ := p["description"].(string)
			fmt.Fprintf(b, "Keys matching `%s`: %s. %s\n\n", k, typeText(p), desc)
		}
	}
	if ap, ok := d["additionalProperties"].(map[string]any); ok {
		fmt.Fprintf(b, "Any key (a name), each %s.\n\n", typeText(ap))
	}
}

// typeText is a schema's type in words, objects linked.
func typeText(p map[string]any) string {
	if ref, ok := p["$ref"].(string); ok {
		return fmt.Sprintf("[%s](#%s)", refName(ref), anchor(refName(ref)))
	}
	if alts, ok := p["anyOf"].([]any); ok {
		var parts []string
		for _, a := range alts {
			parts = append(parts, typeText(a.(map[string]any)))
		}
		return strings.Join(parts, " or ")
	}
	switch t := p["type"].(type) {
	case string:
		switch t {
		case "array":
			if it, ok := p["items"].(map[string]any); ok {
				return "array of " + typeText(it)
			}
		case "object":
			if ap, ok := p["additionalProperties"].(map[string]any); ok {
				return "object of " + typeText(ap)
			}
		}
		return t
	case []any:
		var parts []string
		for _, x := range t {
			parts = append(parts, x.(string))
		}
		return strings.Join(parts, " or ")
	}
	return "any"
}

func refName(ref string) string { return strings.TrimPrefix(ref, "#/$defs/") }

// anchor is the heading anchor GitHub makes of a name.
func anchor(name string) string { return strings.ToLower(strings.ReplaceAll(name, ".", "")) }

// cell escapes a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// The key reference is the one the schema gives (TestSchemaUpToDate -update writes both).
func TestKeyReferenceUpToDate(t *testing.T) {
	schema, err := os.ReadFile(filepath.Join(repoRoot, SchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	got, err := reference(schema)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(repoRoot, referencePath)
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what %s gives: run go test ./internal/resultschema -update", referencePath, SchemaPath)
	}
}
