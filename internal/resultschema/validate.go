package resultschema

import (
	"bytes"
	"fmt"
	"os"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator checks result files against the schema, one root definition
// per output.
type Validator struct {
	schemas map[string]*jsonschema.Schema
}

// Load compiles the schema file at path.
func Load(path string) (*Validator, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the result schema: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v := &Validator{schemas: map[string]*jsonschema.Schema{}}
	for _, o := range []string{"", OutputAnalyze, OutputAnalyzeRuns, OutputVerdict, OutputSweep, OutputCalibrate, OutputMedia} {
		ref := SchemaID
		if o != "" {
			ref += "#/$defs/" + o
		}
		s, err := c.Compile(ref)
		if err != nil {
			return nil, fmt.Errorf("%s: compiling %s: %w", path, ref, err)
		}
		v.schemas[o] = s
	}
	return v, nil
}

// Validate checks data, the JSON an output wrote, against that output's
// definition ("" for any of them). The error names every key or value the
// schema refuses.
func (v *Validator) Validate(output string, data []byte) error {
	s, ok := v.schemas[output]
	if !ok {
		return fmt.Errorf("no output %q in the result schema", output)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("%s output against the result schema: %w", output, err)
	}
	return nil
}
