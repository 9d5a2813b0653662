//! Stored images as a model is shown them: the blob-store bytes an inbound photo left, checked
//! to be an image a provider takes (PNG, JPEG, GIF, WebP, by their magic bytes, never by a
//! name or a claimed type), and scaled down to the configured size.

use clawless_base::media::ImageInput;

/// Largest stored image read for a model request.
pub(crate) const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// `bytes` as an image for a model request, scaled down to fit `max_px` × `max_px`; `Err`
/// says why it cannot be shown.
pub(crate) fn model_image(bytes: &[u8], max_px: u32) -> Result<ImageInput, String> {
    let media_type = image_type(bytes).ok_or("not a PNG, JPEG, GIF or WebP image")?;
    let image = ImageInput {
        media_type: media_type.to_owned(),
        data: bytes.to_vec(),
    };
    crate::media::resize::fit_image(image, max_px).map_err(|error| error.to_string())
}

/// The media type of an image, from its first bytes.
pub(crate) fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_known_by_their_bytes_not_their_names() {
        assert_eq!(image_type(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(image_type(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(image_type(b"GIF89a..."), Some("image/gif"));
        assert_eq!(image_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(image_type(b"%PDF-1.7"), None);
        assert_eq!(image_type(b""), None);
        assert!(model_image(b"<svg/>", 1200).is_err());
        // A PNG signature with nothing after it is not an image the model can take.
        assert!(model_image(b"\x89PNG\r\n\x1a\n", 1200).is_err());
    }
}
