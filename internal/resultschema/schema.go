package resultschema

// SchemaPath is the schema file, from the repository root.
const SchemaPath = "docs/schema/tracekit-result.v1.json"

// SchemaID is the schema's $id.
const SchemaID = "https://github.com/tracekit/tracekit/blob/main/docs/schema/tracekit-result.v1.json"

// The outputs, each a root definition of the schema.
const (
	OutputAnalyze     = "analyze"
	OutputAnalyzeRuns = "analyze_runs"
	OutputVerdict     = "compare_verdict"
	OutputSweep       = "sweep"
	OutputCalibrate   = "calibrate"
	OutputMedia       = "calibrate_media"
)
