package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nsbox/nsbox/agentapi"
)

// RunBatch runs req's runs through POST /v1/runs:batch and calls onItem
// with each run's result or error line as it finishes (in finishing
// order; Index says which run), then returns the summary. The batch waits
// for run slots instead of being refused when the daemon is busy.
// Cancelling ctx cancels the runs not yet finished.
func (c *Client) RunBatch(ctx context.Context, req *agentapi.BatchRequest, onItem func(agentapi.BatchItem)) (*agentapi.BatchSummary, error) {
	resp, err := c.post(ctx, "/runs:batch", req, agentapi.ContentTypeNDJSON)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var item agentapi.BatchItem
		if err := dec.Decode(&item); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("nsbox daemon: batch answer ended before its summary: %w", err)
		}
		switch {
		case item.Type == agentapi.BatchDone && item.Done != nil:
			return item.Done, nil
		case item.Index < 0 && item.Error != nil: // the batch itself failed
			return nil, classed(item.Error)
		case onItem != nil:
			classed(item.Error)
			onItem(item)
		}
	}
}
