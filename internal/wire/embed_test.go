package wire_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// inner has its own MarshalJSON, as poll.Accepted does: promoted to
// a struct that embeds it, it would write that struct as "promoted".
type inner struct {
	Name  string        `json:"name"`
	Every time.Duration `json:"every,omitempty"`
}

func (i inner) MarshalJSON() ([]byte, error) { return []byte(`"promoted"`), nil }

// outer embeds inner, as poll.Monitor embeds poll.Accepted: its
// fields must not be dropped by inner's promoted methods.
type outer struct {
	inner
	Cancel bool          `json:"cancel,omitempty"`
	Wait   time.Duration `json:"wait,omitempty"`
	hidden int
}

type exported struct {
	Inner
	Cancel bool `json:"cancel,omitempty"`
}

type Inner = inner

func TestEmbeddedStructs(t *testing.T) {
	tests := []struct {
		name  string
		order []string
		in    exported
		want  string
	}{
		{"declaration order", nil, exported{Inner: inner{Name: "a", Every: time.Second}, Cancel: true}, `{"name":"a","every":"1s","cancel":true}`},
		{"reordered", []string{"cancel", "every"}, exported{Inner: inner{Name: "a", Every: time.Second}, Cancel: true}, `{"cancel":true,"every":"1s","name":"a"}`},
		{"unnamed members keep their order", []string{"every"}, exported{Inner: inner{Name: "b", Every: time.Minute}, Cancel: true}, `{"every":"1m0s","name":"b","cancel":true}`},
		{"absent members", []string{"cancel", "every"}, exported{Inner: inner{Name: "<&>"}}, `{"name":"\u003c\u0026\u003e"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type plain exported
			got, err := wire.MarshalOrdered(plain(tt.in), tt.order...)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			var back exported
			require.NoError(t, wire.Unmarshal(got, (*plain)(&back)))
			assert.Equal(t, tt.in, back)
		})
	}
	// An unexported embedded struct is left out, as an unexported field
	// is; the outer struct's own fields are kept.
	type plainOuter outer
	got, err := wire.Marshal(plainOuter(outer{inner: inner{Name: "x"}, Cancel: true, Wait: 2 * time.Second, hidden: 1}))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(got, &m))
	assert.Equal(t, true, m["cancel"])
	assert.Equal(t, "2s", m["wait"])
}

// twoShapes travels in two shapes, as poll.WebhookPoll does: its own,
// and its "rule" view (poll.StatusRule).
type twoShapes struct {
	URL    string        `json:"url"`
	Field  string        `json:"status_field,omitempty" rule:"field"`
	States []string      `json:"states,omitempty" rule:"states,omitempty"`
	After  time.Duration `json:"after,omitempty" rule:"after,omitempty"`
}

func TestMarshalView(t *testing.T) {
	tests := []struct {
		name string
		view string
		in   twoShapes
		want string
	}{
		{"own shape", "", twoShapes{URL: "u", Field: "f", States: []string{"a"}, After: time.Second}, `{"url":"u","status_field":"f","states":["a"],"after":"1s"}`},
		{"view", "rule", twoShapes{URL: "u", Field: "f", States: []string{"a"}, After: time.Second}, `{"field":"f","states":["a"],"after":"1s"}`},
		{"view of the zero value", "rule", twoShapes{}, `{"field":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wire.MarshalView(tt.in, tt.view)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			var back twoShapes
			require.NoError(t, wire.UnmarshalView(got, &back, tt.view))
			want := tt.in
			if tt.view != "" {
				want.URL = "" // not in the view
			}
			assert.Equal(t, want, back)
		})
	}
}
