"""Model providers: language models, embeddings, the network guard under every call, and the
encryption of provider keys at rest."""
