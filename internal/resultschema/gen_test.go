package resultschema

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"unicode"
)

// modulePath is the module whose source holds the documented types.
const modulePath = "github.com/tracekit/tracekit"

// generator builds JSON Schema definitions from Go types as encoding/json
// writes them, each property described by its field's doc comment.
type generator struct {
	root    string                       // repository root
	docs    map[string]map[string]string // package path -> "Type" or "Type.Field" -> comment
	defs    map[string]any               // $defs by name
	extra   map[string]string            // "package.Type.json_key" -> description for fields without a comment
	missing []string                     // properties left without a description
	used    map[string]bool              // the extra entries used
	special map[reflect.Type]func(g *generator) any
}

func newGenerator(root string) *generator {
	return &generator{root: root, docs: map[string]map[string]string{}, defs: map[string]any{},
		extra: fieldDocs, used: map[string]bool{}, special: map[reflect.Type]func(*generator) any{}}
}

// pkgDocs parses the non-test Go files of the package at path and returns
// its type and field comments.
func (g *generator) pkgDocs(path string) map[string]string {
	if d, ok := g.docs[path]; ok {
		return d
	}
	d := map[string]string{}
	g.docs[path] = d
	if !strings.HasPrefix(path, modulePath) {
		return d
	}
	dir := filepath.Join(g.root, strings.TrimPrefix(strings.TrimPrefix(path, modulePath), "/"))
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			panic(err)
		}
		for _, decl := range af.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				d[ts.Name.Name] = oneLine(doc.Text())
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				// A field without a comment of its own, in a block of
				// fields (no blank line between) under a comment that
				// names it, is described by that comment: Go comments
				// often describe a group ("Truncated counts ...;
				// TruncatedCompleted those of them ...").
				group, prevLine := "", -1
				for _, fl := range st.Fields.List {
					start := fset.Position(fl.Pos()).Line
					if fl.Doc != nil {
						start = fset.Position(fl.Doc.Pos()).Line
						group = oneLine(fl.Doc.Text())
					} else if start > prevLine+1 {
						group = ""
					}
					prevLine = fset.Position(fl.End()).Line
					text := oneLine(fl.Doc.Text())
					if c := oneLine(fl.Comment.Text()); c != "" {
						text = strings.TrimSpace(text + " " + c)
					}
					for _, n := range fl.Names {
						t := text
						if t == "" && mentions(group, n.Name) {
							t = group
						}
						d[ts.Name.Name+"."+n.Name] = t
					}
				}
			}
		}
	}
	return d
}

// mentions reports whether doc names the identifier name as a word.
func mentions(doc, name string) bool {
	for _, w := range strings.FieldsFunc(doc, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if w == name {
			return true
		}
	}
	return false
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// defName names a struct type's definition: package.Type.
func defName(t reflect.Type) string {
	return filepath.Base(t.PkgPath()) + "." + t.Name()
}

// schema is the schema of a value of type t as encoding/json writes it.
func (g *generator) schema(t reflect.Type) any {
	if f, ok := g.special[t]; ok {
		return f(g)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		name := defName(t)
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = nil // recursion guard
			g.defs[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	panic(fmt.Sprintf("no schema for %s", t))
}

// nullable is s that may also be null: encoding/json writes a nil
// pointer, slice or map without omitempty as null.
func nullable(s any) any {
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// object is the closed object schema of struct t.
func (g *generator) object(t reflect.Type) map[string]any {
	props, required := map[string]any{}, []string{}
	g.fields(t, t, props, &required, false)
	sort.Strings(required)
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	if d := g.pkgDocs(t.PkgPath())[t.Name()]; d != "" {
		o["description"] = d
	}
	return o
}

// fields adds t's JSON properties (embedded structs flattened, as
// encoding/json does) to props; owner is the struct they appear in.
func (g *generator) fields(owner, t reflect.Type, props map[string]any, required *[]string, optional bool) {
	docs := g.pkgDocs(t.PkgPath())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				g.fields(owner, et, props, required, optional || ft.Kind() == reflect.Pointer)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.schema(ft)
		switch ft.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			if !omit && ft.Kind() != reflect.Interface {
				s = nullable(s)
			}
		}
		desc := docs[t.Name()+"."+f.Name]
		if d, ok := g.extra[defName(t)+"."+name]; ok {
			desc = d
			g.used[defName(t)+"."+name] = true
		}
		if desc == "" {
			// No comment on the field or its block: the type's own
			// comment, which then describes its fields together.
			desc = docs[t.Name()]
		}
		if desc == "" {
			g.missing = append(g.missing, defName(t)+"."+name)
		} else {
			desc = renameLead(desc, f.Name, name)
		}
		props[name] = withDescription(s, desc)
		if !omit && !optional {
			*required = append(*required, name)
		}
	}
}

// renameLead replaces a comment's leading Go field name by its JSON key.
func renameLead(desc, field, key string) string {
	if rest, ok := strings.CutPrefix(desc, field); ok && (rest == "" || !unicode.IsLetter(rune(rest[0]))) {
		return key + rest
	}
	return desc
}

// withDescription adds d to a schema (beside a $ref, which 2020-12 allows).
func withDescription(s any, d string) any {
	m := map[string]any{}
	for k, v := range s.(map[string]any) {
		m[k] = v
	}
	if d != "" {
		m["description"] = d
	}
	return m
}

// marshal writes v as indented JSON with a final newline.
func marshal(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

var _ = os.ReadFile
