// Command mlxclient drives the mlx-responses core over gRPC from Go: health, create, stream,
// chain, retrieve, delete and an error's google.rpc.ErrorInfo. It prints one line per step.
//
// Generate the stubs first (plain protoc works: every proto declares its go_package):
//
//	protoc -I proto --go_out=. --go-grpc_out=. proto/mlx_responses/v1/*.proto
//
// See docs/api/grpc.md for the module setup.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	v1 "github.com/mlx-responses/mlx-responses/gen/go/mlx_responses/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func userText(model, text string, maxTokens int64) *v1.CreateResponseParams {
	return &v1.CreateResponseParams{
		Model: model,
		Input: []*v1.Item{{Item: &v1.Item_Message{Message: &v1.MessageItem{
			Role: v1.Role_ROLE_USER,
			Content: []*v1.ContentPart{{Part: &v1.ContentPart_InputText{
				InputText: &v1.InputText{Text: text},
			}}},
		}}}},
		MaxOutputTokens: proto.Int64(maxTokens),
		Temperature:     proto.Float64(0),
	}
}

func outputText(r *v1.Response) string {
	text := ""
	for _, item := range r.GetOutput() {
		for _, part := range item.GetMessage().GetContent() {
			text += part.GetOutputText().GetText()
		}
	}
	return text
}

// reason is the ErrorInfo reason the core attached to a refusal ("" when there is none).
func reason(err error) (codes.Code, string) {
	st := status.Convert(err)
	for _, detail := range st.Details() {
		if info, ok := detail.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

func main() {
	address := flag.String("address", "127.0.0.1:50051", "the core's gRPC address")
	model := flag.String("model", "tiny-chat", "model alias")
	apiKey := flag.String("api-key", "", "sent as `authorization: Bearer KEY` when set")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if *apiKey != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*apiKey)
	}
	conn, err := grpc.DialContext(ctx, *address, grpc.WithInsecure(), grpc.WithBlock())
	if err != nil {
		log.Fatalf("dial: %v", err)
	}
	defer conn.Close()

	// The core answers NOT_SERVING until its first model is loaded.
	health := healthpb.NewHealthClient(conn)
	for {
		answer, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			log.Fatalf("health: %v", err)
		}
		if answer.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			fmt.Println("health", answer.GetStatus())
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	generation := v1.NewGenerationServiceClient(conn)
	storage := v1.NewStorageServiceClient(conn)

	created, err := generation.CreateResponse(ctx, &v1.CreateResponseRequest{
		Params: userText(*model, "Reply with: hello", 8),
	})
	if err != nil {
		log.Fatalf("create: %v", err)
	}
	first := created.GetResponse()
	fmt.Println("create", first.GetId(), first.GetStatus(), first.GetUsage().GetOutputTokens())

	chained := userText(*model, "And again.", 8)
	chained.PreviousResponseId = proto.String(first.GetId())
	stream, err := generation.StreamResponse(ctx, &v1.StreamResponseRequest{Params: chained})
	if err != nil {
		log.Fatalf("stream: %v", err)
	}
	events, deltas, last := 0, 0, v1.EventType_EVENT_TYPE_UNSPECIFIED
	var final *v1.Response
	for {
		batch, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatalf("stream: %v", err)
		}
		for _, event := range batch.GetEvents() {
			events++
			last = event.GetType()
			if last == v1.EventType_EVENT_TYPE_OUTPUT_TEXT_DELTA {
				deltas++
			}
			if snapshot := event.GetSnapshot(); snapshot != nil {
				final = snapshot.GetResponse()
			}
		}
	}
	fmt.Println("stream", events, deltas, last, final.GetPreviousResponseId() == first.GetId())

	got, err := storage.GetResponse(ctx, &v1.GetResponseRequest{Id: first.GetId()})
	if err != nil {
		log.Fatalf("get: %v", err)
	}
	fmt.Println("get", got.GetResponse().GetId(), outputText(got.GetResponse()) == outputText(first))

	deleted, err := storage.DeleteResponse(ctx, &v1.DeleteResponseRequest{Id: first.GetId()})
	if err != nil {
		log.Fatalf("delete: %v", err)
	}
	fmt.Println("delete", deleted.GetId(), deleted.GetDeleted())

	_, err = storage.GetResponse(ctx, &v1.GetResponseRequest{Id: first.GetId()})
	code, why := reason(err)
	fmt.Println("get-deleted", code, why)

	_, err = generation.CreateResponse(ctx, &v1.CreateResponseRequest{
		Params: userText("no-such-model", "hi", 8),
	})
	code, why = reason(err)
	fmt.Println("unknown-model", code, why)
	os.Exit(0)
}
