//! Image bytes as the HTTP wire formats carry them: base64 for Anthropic's `image` blocks, a
//! `data:` URL for OpenAI's `image_url` parts. (Bedrock's SDK takes the raw bytes.)

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use clawless_base::media::ImageInput;

/// What one image costs in the prompt, in tokens, wherever this crate estimates a prompt's
/// size. Providers bill images by their pixels (about 1,600 tokens for a picture scaled to
/// the usual ~1.15 megapixels); the fixed figure keeps estimates on the safe side without
/// decoding the image.
pub const IMAGE_TOKENS: u64 = 1_600;

/// `bytes` in standard base64 with padding.
pub(crate) fn base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// `data:<media type>;base64,<bytes>`.
pub(crate) fn data_url(image: &ImageInput) -> String {
    format!("data:{};base64,{}", image.media_type, base64(&image.data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_url_names_the_type_and_carries_padded_base64() {
        let image = ImageInput {
            media_type: "image/png".to_owned(),
            data: vec![0x89, b'P', b'N', b'G'],
        };
        assert_eq!(data_url(&image), "data:image/png;base64,iVBORw==");
    }
}
