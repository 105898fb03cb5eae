"""Amazon Bedrock: `realtime`, the Converse API through boto3's `bedrock-runtime` client."""
