//! Images scaled down before a model sees them (`agents.defaults.imageMaxDimensionPx`, spec
//! `openclaw-tools.md` §3.8): a photo straight from a phone is several thousand pixels a side,
//! which costs tokens and can exceed what a provider accepts.
//!
//! An image within the limit is passed on untouched (its header is read, not the pixels). A
//! larger one is decoded, scaled to fit keeping its aspect ratio, and re-encoded: PNG stays PNG
//! (screenshots keep sharp text), anything else becomes JPEG. Only PNG, JPEG, GIF and WebP are
//! decoded; anything else, or a broken image, is an error value.

use std::io::Cursor;

use clawless_base::media::ImageInput;
use image::codecs::jpeg::JpegEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, ImageFormat, ImageReader, Limits};

/// The longest side, in pixels, an image is given to a model with, when
/// `agents.defaults.imageMaxDimensionPx` is unset.
pub const DEFAULT_IMAGE_MAX_DIMENSION_PX: u32 = 1200;
/// The JPEG quality of re-encoded images.
const JPEG_QUALITY: u8 = 85;
/// The largest image (either side) decoded at all: beyond it the decode would take more
/// memory than a function has.
const MAX_DECODED_SIDE: u32 = 20_000;
/// The most memory one decode may take.
const MAX_DECODE_ALLOC: u64 = 512 * 1024 * 1024;

/// Why an image could not be fitted.
#[derive(Debug, thiserror::Error)]
pub enum ResizeError {
    /// Not an image of a supported format, or a broken one.
    #[error("the image could not be decoded: {0}")]
    Decode(#[source] image::ImageError),
    /// The scaled image could not be encoded.
    #[error("the image could not be re-encoded: {0}")]
    Encode(#[source] image::ImageError),
}

/// `input` when neither side is larger than `max_px`, else the image scaled down to fit
/// within `max_px` × `max_px` and re-encoded (PNG as PNG, others as JPEG). A `max_px` of 0
/// is taken as 1.
pub fn fit_image(input: ImageInput, max_px: u32) -> Result<ImageInput, ResizeError> {
    let max_px = max_px.max(1);
    let (width, height) = reader(&input.data)?
        .into_dimensions()
        .map_err(ResizeError::Decode)?;
    if width <= max_px && height <= max_px {
        return Ok(input);
    }
    let reader = reader(&input.data)?;
    let format = reader.format();
    let decoded = reader.decode().map_err(ResizeError::Decode)?;
    let scaled = decoded.resize(max_px, max_px, FilterType::Triangle);
    let mut out = Cursor::new(Vec::new());
    let media_type = if format == Some(ImageFormat::Png) {
        scaled
            .write_to(&mut out, ImageFormat::Png)
            .map_err(ResizeError::Encode)?;
        "image/png"
    } else {
        // JPEG has no alpha channel; transparent areas become black, as they would anyway.
        let rgb = DynamicImage::ImageRgb8(scaled.to_rgb8());
        rgb.write_with_encoder(JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY))
            .map_err(ResizeError::Encode)?;
        "image/jpeg"
    };
    tracing::debug!(
        width,
        height,
        new_width = scaled.width(),
        new_height = scaled.height(),
        media_type,
        "image scaled down"
    );
    Ok(ImageInput {
        media_type: media_type.to_owned(),
        data: out.into_inner(),
    })
}

/// A reader over `data` with its format guessed from its bytes and the decode limits set.
fn reader(data: &[u8]) -> Result<ImageReader<Cursor<&[u8]>>, ResizeError> {
    let mut reader = ImageReader::new(Cursor::new(data))
        .with_guessed_format()
        .map_err(|error| ResizeError::Decode(image::ImageError::IoError(error)))?;
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_DECODED_SIDE);
    limits.max_image_height = Some(MAX_DECODED_SIDE);
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    reader.limits(limits);
    Ok(reader)
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{GenericImageView, Rgb, RgbImage, Rgba, RgbaImage};

    fn encoded(image: DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        image.write_to(&mut out, format).expect("encodes");
        out.into_inner()
    }

    fn decode(data: &[u8]) -> DynamicImage {
        image::load_from_memory(data).expect("decodes")
    }

    #[test]
    fn a_wide_png_is_scaled_to_fit_and_stays_png() {
        let wide = RgbaImage::from_pixel(3000, 1000, Rgba([10, 200, 30, 128]));
        let input = ImageInput {
            media_type: "image/png".to_owned(),
            data: encoded(DynamicImage::ImageRgba8(wide), ImageFormat::Png),
        };
        let fitted = fit_image(input, DEFAULT_IMAGE_MAX_DIMENSION_PX).expect("fits");
        assert_eq!(fitted.media_type, "image/png");
        assert_eq!(
            image::guess_format(&fitted.data).ok(),
            Some(ImageFormat::Png)
        );
        let decoded = decode(&fitted.data);
        assert_eq!(decoded.dimensions(), (1200, 400));
        assert_eq!(decoded.get_pixel(600, 200), Rgba([10, 200, 30, 128]));
    }

    #[test]
    fn a_tall_jpeg_or_gif_becomes_a_smaller_jpeg() {
        let tall = DynamicImage::ImageRgb8(RgbImage::from_pixel(500, 2000, Rgb([200, 0, 0])));
        for format in [ImageFormat::Jpeg, ImageFormat::Gif] {
            let input = ImageInput {
                media_type: "image/whatever".to_owned(),
                data: encoded(tall.clone(), format),
            };
            let fitted = fit_image(input, 1000).expect("fits");
            assert_eq!(fitted.media_type, "image/jpeg", "{format:?}");
            assert_eq!(
                image::guess_format(&fitted.data).ok(),
                Some(ImageFormat::Jpeg)
            );
            assert_eq!(decode(&fitted.data).dimensions(), (250, 1000), "{format:?}");
        }
    }

    #[test]
    fn a_small_image_is_passed_on_untouched() {
        let small = DynamicImage::ImageRgb8(RgbImage::from_pixel(1200, 800, Rgb([1, 2, 3])));
        let input = ImageInput {
            media_type: "image/png".to_owned(),
            data: encoded(small, ImageFormat::Png),
        };
        let fitted = fit_image(input.clone(), DEFAULT_IMAGE_MAX_DIMENSION_PX).expect("fits");
        assert_eq!(fitted, input);
    }

    #[test]
    fn the_limit_is_read_from_agents_defaults() {
        let set: crate::config::AgentDefaults =
            serde_yaml::from_str("imageMaxDimensionPx: 800\n").expect("parses");
        assert_eq!(set.image_max_dimension_px(), 800);
        let unset: crate::config::AgentDefaults = serde_yaml::from_str("{}").expect("parses");
        assert_eq!(
            unset.image_max_dimension_px(),
            DEFAULT_IMAGE_MAX_DIMENSION_PX
        );
    }

    #[test]
    fn an_undecodable_image_is_an_error() {
        for data in [
            b"not an image at all".to_vec(),
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR truncated".to_vec(),
            Vec::new(),
        ] {
            let input = ImageInput {
                media_type: "image/png".to_owned(),
                data,
            };
            assert!(matches!(fit_image(input, 100), Err(ResizeError::Decode(_))));
        }
    }
}
