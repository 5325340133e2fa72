package trace

// Version is tracekit's version, stamped into every file it writes. Release
// builds set it with -ldflags "-X github.com/tracekit/tracekit/trace.Version=v1.2.3".
var Version = "v0.1.0-dev"
