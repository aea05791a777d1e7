package runner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func rawFrame(payload string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	return append(b, payload...)
}

func TestReadReply(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		wantErr error
		check   func(*reply) bool
	}{
		{"ready", rawFrame(`{"ready":true}`), nil, func(r *reply) bool { return r.Ready }},
		{"value", rawFrame(`{"count":2,"value":"42"}`), nil, func(r *reply) bool { return r.Count == 2 && *r.Value == "42" }},
		{"figure", rawFrame(`{"count":1,"figures":[{"mime":"image/png","data_base64":"iVBORw=="}]}`), nil,
			func(r *reply) bool {
				return len(r.Figures) == 1 && r.Figures[0].MIME == "image/png" && len(r.Figures[0].Data) == 4
			}},
		{"chart and data", rawFrame(`{"count":1,"value_data":{"a":[1,null]},"figures":[{"mime":"image/png","data_base64":"","chart":{"type":"pie","elements":[]}}]}`), nil,
			func(r *reply) bool {
				return string(r.ValueData) == `{"a":[1,null]}` && string(r.Figures[0].Chart) == `{"type":"pie","elements":[]}`
			}},
		{"exception", rawFrame(`{"count":1,"exception":{"name":"E","value":"v","traceback":"t"}}`), nil,
			func(r *reply) bool { return r.Exception.Name == "E" }},
		{"empty stream", nil, io.EOF, nil},
		{"short header", []byte{0, 0}, io.ErrUnexpectedEOF, nil},
		{"short payload", rawFrame(`{"count":1}`)[:8], io.ErrUnexpectedEOF, nil},
		{"too large", []byte{0xff, 0xff, 0xff, 0xff}, ErrFrameTooLarge, nil},
		{"not json", rawFrame(`nope`), ErrProtocol, nil},
		{"bad base64", rawFrame(`{"figures":[{"data_base64":"!!"}]}`), ErrProtocol, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := readReply(bytes.NewReader(tc.in))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.check != nil && !tc.check(rep) {
				t.Fatalf("reply %+v", rep)
			}
		})
	}
}

func TestWriteFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := writeFrame(&buf, request{Code: "x = 1\n", Marker: "m"}); err != nil {
		t.Fatal(err)
	}
	b, err := readFrame(&buf, MaxFrameBytes)
	if err != nil || string(b) != `{"code":"x = 1\n","marker":"m"}` {
		t.Fatalf("%q %v", b, err)
	}
}

func FuzzReadReply(f *testing.F) {
	f.Add(rawFrame(`{"count":2,"value":"42"}`))
	f.Add(rawFrame(`{"figures":[{"mime":"image/png","data_base64":"AA=="}]}`))
	f.Add([]byte{0, 0, 0, 1, '{'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			rep, err := readReply(r)
			if err != nil {
				return
			}
			if rep == nil {
				t.Fatal("nil reply without error")
			}
		}
	})
}
