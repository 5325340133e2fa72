package api

import (
	"encoding/base64"
	"unsafe"

	"github.com/tracekit/tracekit/trace"
)

// MIME is the media type of item m's bytes (image/png, image/jpeg,
// video/mp4, audio/wav): what a data URI names.
func MIME(m *trace.Media) string {
	switch m.Kind {
	case trace.MediaImage:
		return "image/" + m.Format
	case trace.MediaVideo:
		return "video/" + m.Format
	case trace.MediaAudio:
		return "audio/" + m.Format
	}
	return "application/octet-stream"
}

// AppendDataURI appends item m as a JSON string: a data URI of its bytes
// (m.Data, base64) or, when m.URL is set, that URL. The caller made or
// loaded the bytes before the request was due.
func AppendDataURI(dst []byte, m *trace.Media) []byte {
	if m.URL != "" {
		return AppendString(dst, m.URL)
	}
	dst = append(dst, `"data:`...)
	dst = append(dst, MIME(m)...)
	dst = append(dst, ";base64,"...)
	dst = AppendBase64(dst, m)
	return append(dst, '"')
}

// AppendBase64 appends m.Data in standard base64 (no quotes). The bytes
// are read in place: a copy of megabytes per request would be waste.
func AppendBase64(dst []byte, m *trace.Media) []byte {
	return base64.StdEncoding.AppendEncode(dst, unsafe.Slice(unsafe.StringData(m.Data), len(m.Data)))
}
