package jsapi

import (
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
)

// JSApiStreamNamesRequest is the optional body of STREAM.NAMES: the page
// offset and a subject; only streams with a subject that overlaps it are
// listed (nats-server v2.15.2 STREAM.NAMES and STREAM.LIST).
type JSApiStreamNamesRequest struct {
	ApiPagedRequest
	Subject string `json:"subject,omitempty"`
}

// JSApiStreamListRequest is the optional body of STREAM.LIST, with the
// same keys as JSApiStreamNamesRequest.
type JSApiStreamListRequest struct {
	ApiPagedRequest
	Subject string `json:"subject,omitempty"`
}

// streamNamesResponse lists names. Streams is null, not [], when the page
// is empty, as nats-server v2.15.2 sends it (also on errors).
type streamNamesResponse struct {
	apiResponse
	apiPaged
	Streams []string `json:"streams"`
}

// streamListResponse lists stream infos. Streams is [] when the page is
// empty, also on errors (nats-server v2.15.2). Missing names, in a
// cluster, the streams whose leader did not answer in time or all of
// whose servers are offline (StreamInfoGatherer).
type streamListResponse struct {
	apiResponse
	apiPaged
	Streams []*jetstream.StreamInfo `json:"streams"`
	Missing []string                `json:"missing,omitempty"`
}

// streamNames follows nats-server v2.15.2 jsStreamNamesRequest: level, the
// body decoded only when it is a JSON object or array (10025), then one
// page of at most 1024 sorted names. offset is clamped to total.
func streamNames(a *API, r *request) (response, *jserr.Error) {
	resp := &streamNamesResponse{}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	var req JSApiStreamNamesRequest
	if isJSONObjectOrArray(r.data) {
		if err := decode(r.data, &req); err != nil {
			return resp, err
		}
	}
	names := a.meta().Names(req.Subject)
	start, end := page(len(names), req.Offset, namesLimit)
	resp.apiPaged = apiPaged{Total: len(names), Offset: start, Limit: namesLimit}
	if end > start {
		resp.Streams = names[start:end]
	}
	return resp, nil
}

// streamList is streamNames with a StreamInfo per stream and pages of 256.
// As in nats-server v2.15.2 the infos of a single server carry the stored
// config (the engine's server version metadata is taken out again) and no
// "cluster"; in a cluster they are the infos each stream's leader gives
// (StreamInfoGatherer), "cluster" and metadata included.
func streamList(a *API, r *request) (response, *jserr.Error) {
	resp := &streamListResponse{Streams: []*jetstream.StreamInfo{}}
	if err := r.checkLevel(); err != nil {
		return resp, err
	}
	var req JSApiStreamListRequest
	if isJSONObjectOrArray(r.data) {
		if err := decode(r.data, &req); err != nil {
			return resp, err
		}
	}
	names := a.meta().Names(req.Subject)
	start, end := page(len(names), req.Offset, listLimit)
	resp.apiPaged = apiPaged{Total: len(names), Offset: start, Limit: listLimit}
	if g, ok := a.opts.Cluster.(StreamInfoGatherer); ok {
		// In a cluster, each stream's leader's info, as it answers
		// STREAM.INFO (nats-server v2.15.2 jsClusteredStreamListRequest).
		infos, missing := g.StreamInfos(names[start:end])
		for _, si := range infos {
			if si != nil {
				resp.Streams = append(resp.Streams, si)
			}
		}
		resp.Missing = missing
		return resp, nil
	}
	for _, name := range names[start:end] {
		si, err := a.meta().StreamInfo(name, jetstream.InfoOptions{})
		if err != nil {
			continue // deleted since Names
		}
		si.Cluster = nil
		delete(si.Config.Metadata, stream.MetaServerVersion)
		delete(si.Config.Metadata, stream.MetaServerLevel)
		resp.Streams = append(resp.Streams, si)
	}
	return resp, nil
}
