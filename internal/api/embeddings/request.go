package embeddings

import (
	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

// AppendRequest appends a /v1/embeddings request body: one input per
// message of the turn (role trace.RoleInput), floats asked for.
func AppendRequest(dst []byte, r *api.Request, msgs []trace.Message) []byte {
	dst = append(dst, `{"model":`...)
	dst = api.AppendString(dst, r.Model)
	dst = append(dst, `,"input":[`...)
	for i := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = api.AppendString(dst, msgs[i].Content)
	}
	dst = append(dst, `],"encoding_format":"float"`...)
	dst = r.AppendExtra(dst)
	return append(dst, '}')
}
