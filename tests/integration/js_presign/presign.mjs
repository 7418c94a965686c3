// Prints, as JSON, presigned URLs made by the AWS SDK for JavaScript v3's
// getSignedUrl, the way web portals and labelling tools hand them out.
// usage: node presign.mjs ENDPOINT BUCKET KEY ACCESS_KEY SECRET BODY_CRC32_BASE64
import { S3Client, GetObjectCommand, HeadObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";

const [endpoint, bucket, key, accessKeyId, secretAccessKey, crc32] = process.argv.slice(2);
const config = { endpoint, region: "us-east-1", forcePathStyle: true, credentials: { accessKeyId, secretAccessKey } };
const current = new S3Client(config); // the SDK's defaults: a checksum on every PUT
const whenRequired = new S3Client({ ...config, requestChecksumCalculation: "WHEN_REQUIRED" });
const sign = (client, command) => getSignedUrl(client, command, { expiresIn: 600 });
const out = {
  get: await sign(current, new GetObjectCommand({ Bucket: bucket, Key: key })),
  head: await sign(current, new HeadObjectCommand({ Bucket: bucket, Key: key })),
  get_as_text: await sign(current, new GetObjectCommand({ Bucket: bucket, Key: key, ResponseContentType: "text/plain" })),
  put_default: await sign(current, new PutObjectCommand({ Bucket: bucket, Key: key })),
  put_when_required: await sign(whenRequired, new PutObjectCommand({ Bucket: bucket, Key: key })),
  put_crc32: await sign(current, new PutObjectCommand({ Bucket: bucket, Key: key, ChecksumCRC32: crc32 })),
  put_wrong_crc32: await sign(current, new PutObjectCommand({ Bucket: bucket, Key: key, ChecksumCRC32: "AAAAAQ==" })),
  put_metadata: await sign(whenRequired, new PutObjectCommand({ Bucket: bucket, Key: key, Metadata: { a: "b" } })),
};
process.stdout.write(JSON.stringify(out) + "\n");
